"""How the kernel host calls a declared kernel (docs/spec/py-backend.md#contract): our inputs under
its keywords, in its layout, with the flags, gate parameters, constants and query scale it declares
(a request may choose the scale: docs/spec/py-backend.md#edges); a packed batch's offsets under its
`varlen` keyword; the forward, the backward by autograd through the forward or the kernel's own
explicit backward; every tensor it returns checked and brought back to our layout (kernel_layout.py).
A guarded call hands the kernel each tensor inside guard regions (docs/spec/hazards.md#guards), and
memory the kernel allocates during a call starts filled (docs/spec/hazards.md#unwritten).
"""
from __future__ import annotations

import sys
import traceback
from typing import Dict, List, Optional, Tuple

import torch

from .hazards import FillUnwritten, Guards
from .kernel_declaration import as_shipped
from .kernel_declaration import GATE_NAMES, Kernel, KernelError, tb_tail
from .kernel_layout import (check_tensor, from_kernel_rows, from_kernel_state, from_kernel_token, row_count, rows_shape,
                            to_kernel_rows, to_kernel_state, to_kernel_token)
from .rules import TOKEN_ROWS


def query_scale(k: Kernel, d_k: int) -> Tuple[Optional[str], Optional[float], float]:
    """(keyword to pass the scale to, or None; the value passed; the fixed factor the kernel applies
    to q that the host divides out, 1.0 if none). A declared {'keyword', 'value'} scale is the
    kernel's own: the harness has already scaled the reference's q (docs/spec/py-backend.md#scale)."""
    s = k.scale
    if isinstance(s, dict):
        if s["keyword"] is None:
            return None, None, 1.0
        if k.scale_value is not None:
            return s["keyword"], k.scale_value, 1.0
        return s["keyword"], (d_k ** -0.5 if s["value"] == "rsqrt_dk" else float(s["value"])), 1.0
    if isinstance(s, str):
        return s, (1.0 if k.scale_value is None else k.scale_value), 1.0
    if s is None:
        return None, None, 1.0
    return None, None, float(s)


def kernel_inputs(k: Kernel, rule: str, inputs: Dict[str, torch.Tensor], factor: float,
                  cfg: Optional[dict] = None) -> Dict[str, torch.Tensor]:
    """Our inputs under the kernel's keywords. An input the kernel does not take must be declared
    absent (the harness then never sends it); one it neither takes nor declares is an error naming it.
    An input with several rows per token goes in the kernel's rows (`token_rows`)."""
    kw: Dict[str, torch.Tensor] = {}
    for name, t in inputs.items():
        key = k.keyword(name)
        if name in k.absent:
            raise KernelError(f"in.{name}: {k.spec} declares {name} absent, but the request carries it")
        if not k.accepts(key):
            raise KernelError(f"{k.spec} does not take the input {name} (keyword {key!r}) that {rule} reads; "
                              f"declare it in nlc['absent'] if the kernel has no such input, or its keyword in "
                              f"nlc['names'] if the kernel takes it under another name (docs/spec/py-backend.md#absent)")
        if name in k.per_head:
            # equal over the tokens and sequences of a head: the first token's, one per head (none: zeros)
            kw[key] = t[0, 0] if t.shape[1] > 0 else t.new_zeros(t.shape[2:])
            continue
        if name == "q" and factor != 1.0:
            t = t / factor  # the kernel multiplies q by `factor`; ours does not
        if k.token_rows is not None:
            t = to_kernel_rows(k, t, row_count(rule, name, cfg or {}), name in GATE_NAMES)
        kw[key] = to_kernel_token(k, t)
    return kw


def gate_params(H: int, d: int) -> Tuple[torch.Tensor, torch.Tensor]:
    """A softplus gate's per-head parameters (docs/spec/py-backend.md#gate-forms; the harness maps with
    the same values, conformance/kernel/conventions.ts gateParams): A_log[h] = (h mod 4)/4 - 1/4,
    dt_bias[h, i] = ((h + i) mod 5 - 2)/8, f32 [H] and [H * d]; multiples of 1/8, exact in every dtype."""
    h = torch.arange(H, dtype=torch.float64)
    i = torch.arange(d, dtype=torch.float64)
    a_log = torch.remainder(h, 4) / 4 - 0.25
    dt_bias = (torch.remainder(h[:, None] + i[None, :], 5) - 2) / 8
    return a_log.to(torch.float32), dt_bias.reshape(-1).to(torch.float32)


def add_flags(k: Kernel, kw: Dict[str, object], d_k: int, H: int = 1, rule: str = "", cfg: Optional[dict] = None) -> None:
    scale_kw, scale_value, _ = query_scale(k, d_k)
    if scale_kw:
        kw[scale_kw] = scale_value
    if k.token_rows is not None and k.token_rows["count"] is not None and not rule.endswith(".frozen"):
        # the rows per token of the rule's row inputs (Gated DeltaProduct's n_h), an int
        kw[k.token_rows["count"]] = row_count(rule, TOKEN_ROWS[rule]["inputs"][0], cfg or {})
    if isinstance(k.qk_l2norm, str):
        kw[k.qk_l2norm] = True
    for f in k.gate_forms.values():
        for flag in f["flags"]:
            kw[flag] = True
        if f["form"] == "softplus":
            a_log, dt_bias = gate_params(H, d_k)
            kw[f["A_log"]] = a_log.to(k.device)
            if f["dt_bias"] is not None:
                kw[f["dt_bias"]] = dt_bias.to(k.device)
    for c, v in k.constants.items():
        if c in kw:
            raise KernelError(f"{k.spec}.nlc['constants'][{c!r}]: the keyword {c!r} is one the host passes itself "
                              "(an input, the state, a flag, the scale or a row count); declare it there")
        kw[c] = v


def guard_labels(k: Kernel, inputs: Dict[str, torch.Tensor], state: Dict[str, torch.Tensor], single: bool) -> Dict[str, str]:
    """The kernel's keyword of each tensor it receives -> our name of it (docs/spec/hazards.md#guards)."""
    labels = {k.keyword(n): n for n in inputs}
    labels[k.initial_state_kw] = f"state.{next(iter(state))}" if single else "state"
    return labels


def call_keywords(k: Kernel, rule: str, cfg: dict, inputs: Dict[str, torch.Tensor], state: Dict[str, torch.Tensor],
                  cu_seqlens: Optional[torch.Tensor], output_final_state: bool) -> Tuple[Dict[str, object], bool, float]:
    """The keywords of every call of the kernel, its forward and its own backward alike: the inputs
    in its parametrisation, the initial state, output_final_state (a forward that returns it), the
    flags and constants, the rule (a kernel of several), a packed batch's offsets and the
    configuration. Returns them, whether the state travels as one tensor, and the query's scale factor."""
    d_k = inputs["q"].shape[-1]
    factor = query_scale(k, d_k)[2]
    kw: Dict[str, object] = dict(kernel_inputs(k, rule, inputs, factor, cfg))
    single = len(state) == 1 and not k.state_dict
    st = {n: to_kernel_state(k, t) for n, t in state.items()}
    kw[k.initial_state_kw] = next(iter(st.values())) if single else st
    if output_final_state and k.output_final_state_kw:
        kw[k.output_final_state_kw] = True
    add_flags(k, kw, d_k, inputs["q"].shape[2], rule, cfg)
    if len(k.rules) > 1:
        kw["rule"] = rule
    if cu_seqlens is not None:
        kw[k.varlen] = cu_seqlens
    if k.configurations is not None:
        kw["configuration"] = k.configuration or k.configurations[0]
    return kw, single, factor


def call_forward(k: Kernel, rule: str, cfg: dict, inputs: Dict[str, torch.Tensor], state: Dict[str, torch.Tensor],
                 cu_seqlens: Optional[torch.Tensor] = None, guards: Optional[Guards] = None):
    """Runs the forward on canonical-layout tensors (already on the device, in the kernel's
    dtype); returns (y, final state) canonical. Conversions stay in the autograd graph. A frozen
    read (`<rule>.frozen`) returns y alone; its state is unchanged, so the final state is None.
    `cu_seqlens`: a packed batch's offsets, passed under the kernel's `varlen` keyword."""
    frozen = rule.endswith(".frozen")
    kw, single, _ = call_keywords(k, rule, cfg, inputs, state, cu_seqlens, output_final_state=not frozen)
    if k.accepts("config"):
        kw["config"] = dict(cfg)
    if guards is not None:
        guards.wrap_all(kw, guard_labels(k, inputs, state, single))
    try:
        with as_shipped(), FillUnwritten():
            out = k.fn(**kw)
    except Exception as e:
        sys.stderr.write(traceback.format_exc())
        raise KernelError(f"{k.spec} raised {type(e).__name__}: {e}\n{tb_tail()}") from None
    B, T, H, d_out = inputs["q"].shape  # y_t is a read with q_t: one row of d per head
    if frozen:
        return from_kernel_token(k, check_tensor(k, "y", out, [B, T, H, d_out], "token")), None
    if not isinstance(out, (tuple, list)) or len(out) != 2:
        raise KernelError(f"{k.spec} returned {type(out).__name__}, expected (y, final_state)")
    y, fin = out
    y = from_kernel_token(k, check_tensor(k, "y", y, [B, T, H, d_out], "token"))
    if single:
        fin = {next(iter(state)): fin}
    if not isinstance(fin, dict):
        raise KernelError(f"{k.spec} returned the final state as {type(fin).__name__}, expected a dict by state name ({', '.join(state)})")
    final = {}
    for n, t0 in state.items():
        if n not in fin:
            raise KernelError(f"{k.spec} returned no final state '{n}'")
        final[n] = from_kernel_state(k, check_tensor(k, f"final state {n}", fin[n], list(t0.shape), "state"))
    return y, final


def call_backward(k: Kernel, rule, cfg, inputs, state, dy, d_state, cu, guards,
                  forward: Optional[List[Tuple[str, torch.Tensor]]] = None) -> Dict[str, torch.Tensor]:
    """The gradients; `forward` receives the outputs of the forward an autograd backward runs (y, final states)."""
    if k.backward is not None:
        grads = explicit_backward(k, rule, cfg, inputs, state, dy, d_state, cu, guards)
    else:
        leaves = {n: t.clone().requires_grad_(True) for n, t in inputs.items()}
        st0 = {n: t.clone().requires_grad_(True) for n, t in state.items()}
        with torch.enable_grad():
            y, final = call_forward(k, rule, cfg, leaves, st0, cu, guards)
            if forward is not None:
                forward.extend([("y", y)] + [(f"state.{n}", t) for n, t in (final or {}).items()])
            loss = (y * dy).sum() if dy is not None else y.sum() * 0
            for n, g in d_state.items():
                loss = loss + (final[n] * g).sum()
            order = list(leaves.items()) + [(f"state.{n}", t) for n, t in st0.items()]
            try:
                with as_shipped(), FillUnwritten():  # an autograd Function's backward allocates here
                    gs = torch.autograd.grad(loss, [t for _, t in order], allow_unused=True)
            except Exception as e:
                sys.stderr.write(traceback.format_exc())
                raise KernelError(f"{k.spec}: autograd of the forward failed: {type(e).__name__}: {e}") from None
        grads = {n: torch.zeros_like(t) if g is None else g for (n, t), g in zip(order, gs)}
    return grads


def explicit_backward(k: Kernel, rule, cfg, inputs, state, dy, d_state, cu_seqlens=None,
                      guards: Optional[Guards] = None) -> Dict[str, torch.Tensor]:
    """The kernel's own backward: called with the forward's keywords plus `dy` and `d_final_state`;
    returns a dict of gradients by the kernel's keyword names (initial state under its keyword)."""
    kw, single, factor = call_keywords(k, rule, cfg, inputs, state, cu_seqlens, output_final_state=False)
    kw["dy"] = to_kernel_token(k, dy) if dy is not None else None
    ds = {n: to_kernel_state(k, t) for n, t in d_state.items()}
    kw["d_final_state"] = (next(iter(ds.values())) if ds else None) if single else (ds or None)
    if guards is not None:
        labels = guard_labels(k, inputs, state, single)
        labels.update({"dy": "dy", "d_final_state": f"dstate.{next(iter(state))}" if single else "dstate"})
        guards.wrap_all(kw, labels)
    try:
        with as_shipped(), FillUnwritten():
            out = k.backward(**kw)
    except Exception as e:
        sys.stderr.write(traceback.format_exc())
        raise KernelError(f"{k.spec}.backward raised {type(e).__name__}: {e}\n{tb_tail()}") from None
    if not isinstance(out, dict):
        raise KernelError(f"{k.spec}.backward returned {type(out).__name__}, expected a dict of gradients by keyword name")
    grads: Dict[str, torch.Tensor] = {}
    for name, t in inputs.items():
        key = k.keyword(name)
        g = out.get(key)
        if g is None:
            grads[name] = torch.zeros_like(t)
            continue
        n = row_count(rule, name, cfg or {}) if k.token_rows is not None else None
        gate = name in GATE_NAMES
        g = from_kernel_token(k, check_tensor(k, f"gradient {key}", g, rows_shape(k, list(t.shape), n, gate), "token"))
        g = from_kernel_rows(k, g, n, gate)
        grads[name] = g / factor if name == "q" and factor != 1.0 else g
    g0 = out.get(k.initial_state_kw)
    if not single and g0 is not None and not isinstance(g0, dict):
        raise KernelError(f"{k.spec}.backward returned {k.initial_state_kw} as {type(g0).__name__}, expected a dict by state name")
    for n, t in state.items():
        g = g0 if single else (g0 or {}).get(n)
        grads[f"state.{n}"] = torch.zeros_like(t) if g is None else from_kernel_state(k, check_tensor(
            k, f"gradient {k.initial_state_kw}{'' if single else '.' + n}", g, list(t.shape), "state"))
    return grads


# The contract probe that sends a packed batch with B = 2 (docs/spec/py-backend.md#contracts).
CONTRACT_BATCHED_CU_SEQLENS = "batch_with_cu_seqlens"


def packed_offsets(k: Kernel, cu, q: torch.Tensor, state: Dict[str, torch.Tensor], batched: bool = False) -> Optional[torch.Tensor]:
    """A packed batch's offsets from the request header (docs/spec/py-backend.md#packed) as the int64
    tensor flash-linear-attention's kernels take, on the kernel's device; None for an unpacked batch.
    `batched`: the contract probe, whose B > 1 is the point."""
    if cu is None:
        return None
    if k.varlen is None:
        raise KernelError(f"cu_seqlens: {k.spec} declares no nlc['varlen'], but the request is a packed batch")
    B, T = q.shape[0], q.shape[1]
    # equal offsets are an empty sequence (docs/spec/py-backend.md#edges); decreasing ones are refused
    if (not isinstance(cu, list) or len(cu) < 2 or not all(isinstance(c, int) and not isinstance(c, bool) for c in cu)
            or cu[0] != 0 or cu[-1] != T or any(b < a for a, b in zip(cu, cu[1:])) or (B != 1 and not batched)):
        raise KernelError(f"cu_seqlens: expected offsets non-decreasing from 0 to T = {T} with B = 1, got {cu!r} (B = {B})")
    for n, t in state.items():
        if t.shape[0] != len(cu) - 1:
            raise KernelError(f"state.{n}: a packed batch of {len(cu) - 1} sequences has one state each, got {list(t.shape)}")
    return torch.tensor(cu, dtype=torch.long, device=k.device)
