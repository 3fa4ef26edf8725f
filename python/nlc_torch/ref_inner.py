"""The `inner` request: one rule's inner recurrence (the per-token loop after the projections and
gates) on N independent sequences, with the gradients of every inner input AND of the initial
state for loss = sum(y * dy) + sum(final_state * d_final_state), all by torch.autograd.

The `py:` kernel backend takes ref32, the yardstick of the flash-attention bound, from this
request in f32: a plain f32 run, forward and autograd backward, of an implementation that C9
keeps in agreement with the TypeScript reference (docs/spec/py-backend.md#reference). ref64 is the
TypeScript reference itself. f64 is served too.
"""
from __future__ import annotations

import contextlib
from typing import Dict, List, Optional

import torch

from .rules import GATES, INNER, TOKEN_ROWS, InputError, _frozen_read, resolve_config
from .chunk_stored import CHUNKED_RULES, run_chunked
from .storage import STORING_RULES, storing

GATE_NAMES = ("alpha", "theta", "eta")
TOKEN_NAMES = ("k", "v", "q", "x", "p", "a", "b", "omega")
DTYPES = {"f64": torch.float64, "f32": torch.float32}


def run_inner(key: str, cfg_in: dict, dtype: str, inputs: Dict[str, torch.Tensor], state: Dict[str, torch.Tensor],
              dy: Optional[torch.Tensor], d_state: Dict[str, torch.Tensor],
              intermediates: Optional[dict] = None) -> Dict[str, Dict[str, torch.Tensor]]:
    """inputs: k v q x omega [N, T, d] and gates [N, T]; state and d_state [N, r, c]; dy [N, T, d].
    `intermediates` {"dtype", "rounding"}: the values the rule marks as stored are held in that
    dtype (docs/spec/precision.md#intermediates); with "chunk": C, the rule runs in its exact
    chunked form as a chunked kernel stores it (chunk_stored.py, #intermediates-chunked); None: the
    plain run."""
    frozen = key.endswith(".frozen")
    if frozen:
        key = key[: -len(".frozen")]
    if key not in INNER:
        raise InputError(f"rule: '{key}' has no inner recurrence in the torch reference (expected one of {', '.join(INNER)})")
    if dtype not in DTYPES:
        raise InputError(f"dtype: expected f64 or f32, got {dtype!r}")
    dt = DTYPES[dtype]
    if intermediates is not None and (frozen or key not in STORING_RULES):
        raise InputError(f"intermediates: the torch reference marks no stored values in {key}{'.frozen' if frozen else ''} "
                         f"(it does in: {', '.join(STORING_RULES)}); docs/spec/precision.md#intermediates")
    chunk = None if intermediates is None else intermediates.get("chunk")
    if chunk is not None:
        if isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1:
            raise InputError(f"intermediates.chunk: expected a positive integer chunk size, got {chunk!r}")
        if key not in CHUNKED_RULES:
            raise InputError(f"intermediates.chunk: the torch reference has no chunked stored form of {key} "
                             f"(it has: {', '.join(CHUNKED_RULES)}); docs/spec/precision.md#intermediates-chunked")
    # an empty sequence (a packed batch's equal offsets, docs/spec/py-backend.md#edges): seq_len = 0 runs
    # no step; its final state is the initial state, so d(initial state) = d(final state)
    empty = isinstance(cfg_in, dict) and cfg_in.get("seq_len") == 0 and not isinstance(cfg_in.get("seq_len"), bool)
    cfg = resolve_config(key, {**cfg_in, "seq_len": 1} if empty else cfg_in)
    if empty:
        cfg = {**cfg, "seq_len": 0}
    for n in (("q",) if frozen else ("k", "q")):  # Atlas reads no v; a frozen read only q
        if n not in inputs:
            raise InputError(f"in.{n}: missing")
    N = inputs["q"].shape[0]
    for n, t in list(inputs.items()) + list(state.items()) + list(d_state.items()):
        if t.shape[0] != N:
            raise InputError(f"{n}: leading (sequence) dimension {t.shape[0]}, in.q has {N}")
    for n in d_state:
        if n not in state:
            raise InputError(f"dstate.{n}: no initial state '{n}' was given")
    out: Dict[str, List[torch.Tensor]] = {}

    def put(name: str, t: torch.Tensor) -> None:
        out.setdefault(name, []).append(t.detach().to(torch.float64))

    for s in range(N):
        leaves = {n: t[s].to(dt).clone().requires_grad_(True) for n, t in inputs.items()}
        st0 = {n: t[s].to(dt).clone().requires_grad_(True) for n, t in state.items()}
        # an input with several rows per token arrives [T, n*d] (a gate [T, n]) and the recurrence reads
        # its rows, [T*n, d] ([T*n]), row t*n + j (Gated DeltaProduct's k, v, theta); the gradients keep the leaves' shapes
        rows = {} if frozen else {n: (leaves[n].reshape(-1) if n in GATE_NAMES else leaves[n].reshape(-1, inputs["q"].shape[-1]))
                                  for n in TOKEN_ROWS.get(key, {}).get("inputs", ()) if n in leaves}
        args = {**leaves, **rows}
        gates = {} if frozen else {g: args[g] for g in GATES[key]}
        low = contextlib.nullcontext() if intermediates is None else storing(intermediates.get("dtype"), intermediates.get("rounding", "nearest"))
        with torch.enable_grad(), low:
            if empty:  # no step: no outputs, the state as it was
                q0 = leaves["q"]
                # tied to the state (by zero) so that the loss is a function of it even with nothing to read
                tie = sum(t.sum() for t in st0.values()) * 0 if st0 else q0.sum() * 0
                y, final = q0.new_zeros(0, *(dy.shape[2:] if dy is not None else q0.shape[1:])) + tie, dict(st0)
            elif frozen:  # the read leaves the state unchanged
                y, final = _frozen_read(key, leaves["q"], st0, cfg), dict(st0)
            elif chunk is not None:  # the exact chunked form, stored as a chunked kernel stores
                y, final = run_chunked(key, args["k"], args["v"], args["q"], gates, st0, chunk)
            else:
                extra = {n: args[n] for n in ("p", "a", "b") if n in args}  # Comba's p, DPLR's a and b
                y, final = INNER[key](args["k"], args.get("v"), args["q"], args.get("x"), gates, args.get("omega"), st0, cfg, **extra)
            loss = (y * dy[s].to(dt)).sum() if dy is not None else y.sum() * 0
            for n, g in d_state.items():
                loss = loss + (final[n] * g[s].to(dt)).sum()
            order = list(leaves.values()) + list(st0.values())
            gs = torch.autograd.grad(loss, order, allow_unused=True)
        put("y", y)
        for n in state:
            put(f"state.{n}", final[n])
        for (n, leaf), g in zip(list(leaves.items()) + [(f"state.{m}", t) for m, t in st0.items()], gs):
            put(f"grads.{n}", torch.zeros_like(leaf) if g is None else g)
    return {n: torch.stack(ts) for n, ts in out.items()}


def handle_inner(header: dict, tensors: Dict[str, torch.Tensor]):
    key, cfg, dtype = header.get("rule"), header.get("config"), header.get("dtype", "f64")
    if not isinstance(key, str):
        raise InputError("rule: expected a rule key string")
    if not isinstance(cfg, dict):
        raise InputError("config: expected an object")
    inputs, state, d_state, dy = {}, {}, {}, None
    for name, t in tensors.items():
        if name.startswith("in."):
            inputs[name[3:]] = t
        elif name.startswith("state."):
            state[name[6:]] = t
        elif name.startswith("dstate."):
            d_state[name[7:]] = t
        elif name == "dy":
            dy = t
        else:
            raise InputError(f"tensors.{name}: unknown tensor (expected in.<name>, state.<name>, dstate.<name>, dy)")
    for n in inputs:
        if n not in TOKEN_NAMES + GATE_NAMES:
            raise InputError(f"in.{n}: not an inner input (expected {', '.join(TOKEN_NAMES + GATE_NAMES)})")
    inter = header.get("intermediates")
    if inter is not None and not isinstance(inter, dict):
        raise InputError("intermediates: expected an object {dtype, rounding}")
    r = run_inner(key, cfg, dtype, inputs, state, dy, d_state, inter)
    return {"ok": True, "rule": key, "dtype": dtype}, list(r.items())
