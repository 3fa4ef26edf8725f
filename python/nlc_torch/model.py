"""The CMS model in its three compositions, forward only (sheet 1 §8.1, §9.2-§9.4, §9.7; README D10-D13;
composition sheet: docs/spec/composition.md). MAG, the default:

    X = W_embed[ids] ;  A = SWA(X W_q^T, X W_k^T, X W_v^T)
    y_l = rule_l(X) from the level's context when level l is active, its frozen read when not
    y_c = sum_l y_l  (x 1/sqrt(k) when k > 2) ;  O = A ⊙ sigmoid(y_c)
    logits = (O W_o^T) W_unembed ;  loss = mean cross entropy over targets != -1 (D12)

MAC (pattern "mac"): every level first reads its context with X (frozen read, active or not),
h = sum_l read_l (x 1/sqrt(k) when k > 2); S = [W_persist; h; X] goes through causal attention
over all its rows; Y = S's last seq_len output rows; then the levels run on Y (rule when active,
frozen read when not), r = their sum; O = Y ⊙ sigmoid(r), and the same head.
MAL (pattern "mal"): the levels run on X, m = their sum; U = X + m; A = SWA(U W_q^T, ...);
logits = (A W_o^T) W_unembed.

Learned frequency gate (D10): m = mean_t X[t], g_l = sigmoid(b_freq_l + w_freq_l . m), level l is
active iff l == 0 or g_l > threshold. Every level's output enters the sum through a
straight-through unit multiplier whose backward gives dg_l = <dL/d(sum), y_l>.

Gradients come from torch.autograd; frozen levels' W_Q gradient goes to the error buffer (D13),
the learned gate's w_freq/b_freq gradients stay in the step's gradients.
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence

import torch

from .rules import (DT, STEP_LOCAL_STATE, InputError, MEMORY_RULES, check_params, frozen_forward, level_forward,
                    param_shapes, resolve_config, resolve_state, sigmoid, state_shapes, swa)

MODEL_PARAMS = ["W_embed", "W_q", "W_k", "W_v", "W_o", "W_unembed"]
FREQ_PARAMS = ["w_freq", "b_freq"]
DEFAULT_CHUNK_SIZES = {1: [1], 2: [1, 8], 4: [1, 8, 64, 512]}


class StraightThroughUnit(torch.autograd.Function):
    """y_l * 1 in the forward; in the backward the unit multiplier's gradient goes to g_l as if
    the multiplier were g_l itself (D10): dg_l = <dy, y_l>, dy_l = dy."""

    @staticmethod
    def forward(ctx, y, g):
        ctx.save_for_backward(y)
        return y.clone()

    @staticmethod
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        return dy, (dy * y).sum().reshape(1)


def _int_list(v, name: str, n: int, lo: int, hi: int, pad_ok: bool) -> List[int]:
    if not isinstance(v, list):
        raise InputError(f"{name}: expected a list of {n} integers")
    if len(v) != n:
        raise InputError(f"{name}: length {len(v)}, expected seq_len = {n}")
    out = []
    for i, x in enumerate(v):
        if isinstance(x, bool) or not isinstance(x, (int, float)) or x != int(x):
            raise InputError(f"{name}[{i}]: {x!r} is not an integer")
        x = int(x)
        if not (lo <= x < hi or (pad_ok and x == -1)):
            raise InputError(f"{name}[{i}]: {x} is out of range [0, {hi})" + (" (or -1 for padding)" if pad_ok else ""))
        out.append(x)
    return out


def run_model(spec: Dict, ids, targets, params_model: Dict[str, torch.Tensor],
              params_levels: Sequence[Dict[str, torch.Tensor]],
              context: Optional[Sequence[Optional[Dict[str, torch.Tensor]]]] = None,
              active: Optional[Sequence[bool]] = None, step: Optional[int] = None) -> Dict:
    """spec: d, seq_len, vocab, heads, window, levels [{rule, hyper}], chunk_sizes (optional: D11
    defaults), freq_schedule 'fixed' | 'learned', freq_threshold (default 0.5)."""
    for name in ("d", "seq_len", "vocab", "heads", "window"):
        v = spec.get(name)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v) or v < 1:
            raise InputError(f"config.{name}: expected a positive integer, got {v!r}")
    d, s, V = int(spec["d"]), int(spec["seq_len"]), int(spec["vocab"])
    heads, window = int(spec["heads"]), int(spec["window"])
    if d % heads != 0:
        raise InputError(f"config.heads: {heads} must divide d = {d}")
    levels = spec.get("levels")
    if not isinstance(levels, list) or not levels:
        raise InputError("levels: expected a non-empty list of {rule, hyper}")
    k = len(levels)
    chunk = spec.get("chunk_sizes") or DEFAULT_CHUNK_SIZES.get(k)
    if chunk is None or len(chunk) != k or any(not isinstance(c, int) or c < 1 for c in chunk):
        raise InputError(f"chunk_sizes: expected {k} positive integers, got {chunk!r}")
    freq = spec.get("freq_schedule", "fixed")
    if freq not in ("fixed", "learned"):
        raise InputError(f"config.freq_schedule: expected 'fixed' or 'learned', got {freq!r}")
    threshold = float(spec.get("freq_threshold", 0.5))
    pattern = spec.get("pattern", "mag")
    if pattern not in ("mag", "mac", "mal"):
        raise InputError(f"pattern: expected 'mag', 'mac' or 'mal', got {pattern!r}")
    n_p = spec.get("persistent")
    if pattern != "mac" and n_p is not None:
        raise InputError(f"config.persistent: only the mac pattern has persistent tokens (pattern {pattern!r})")
    if pattern == "mac":
        n_p = 2 if n_p is None else n_p
        if isinstance(n_p, bool) or not isinstance(n_p, int) or n_p < 1:
            raise InputError(f"config.persistent: expected an integer >= 1, got {n_p!r}")

    cfgs = []
    for l, lv in enumerate(levels):
        rule = lv.get("rule") if isinstance(lv, dict) else None
        if rule not in MEMORY_RULES:
            raise InputError(f"levels[{l}].rule: {rule!r} is not a memory rule ({', '.join(MEMORY_RULES)})")
        hyper = dict(lv.get("hyper") or {})
        hyper.update({"d": d, "seq_len": s})
        try:
            cfgs.append(resolve_config(rule, hyper))
        except InputError as e:
            raise InputError(f"levels[{l}].{e}") from None

    ids = _int_list(ids, "input_ids", s, 0, V, False)
    targets = _int_list(targets, "target_ids", s, 0, V, True)

    mshapes = {"W_embed": (V, d), "W_q": (d, d), "W_k": (d, d), "W_v": (d, d), "W_o": (d, d), "W_unembed": (d, V)}
    if pattern == "mac":
        mshapes["W_persist"] = (n_p, d)
    for n, shape in mshapes.items():
        t = params_model.get(n)
        if t is None:
            raise InputError(f"params.model.{n}: missing")
        if tuple(t.shape) != shape:
            raise InputError(f"params.model.{n}: expected shape {list(shape)}, got {list(t.shape)}")
    if len(params_levels) != k:
        raise InputError(f"params.levels: {len(params_levels)} records, k = {k}")
    for l in range(k):
        rule = levels[l]["rule"]
        check_params(rule, cfgs[l], params_levels[l], f"params.levels.{l}")
        if freq == "learned":
            for n, shape in (("w_freq", (d,)), ("b_freq", (1,))):
                t = params_levels[l].get(n)
                if t is None:
                    raise InputError(f"params.levels.{l}.{n}: missing (learned frequency gate)")
                if tuple(t.shape) != shape:
                    raise InputError(f"params.levels.{l}.{n}: expected shape {list(shape)}, got {list(t.shape)}")
    context = list(context) if context is not None else [None] * k
    if len(context) != k:
        raise InputError(f"context: {len(context)} levels, k = {k}")

    if freq == "fixed":
        if active is None:
            if step is None:
                raise InputError("active: missing (give the level pattern, or 'step' for the D11 pulse)")
            active = [int(step) % c == 0 for c in chunk]
        if len(active) != k or any(not isinstance(a, bool) for a in active):
            raise InputError(f"active: expected {k} booleans, got {active!r}")

    # Leaves.
    Pm = {n: params_model[n].detach().to(DT).clone().requires_grad_(True) for n in mshapes}
    Pl = [{n: t.detach().to(DT).clone().requires_grad_(True) for n, t in rec.items()} for rec in params_levels]
    states = []
    for l in range(k):
        rule = levels[l]["rule"]
        given = {n: t.to(DT) for n, t in (context[l] or {}).items() if n not in STEP_LOCAL_STATE.get(rule, ())}
        st = resolve_state(rule, cfgs[l], given, f"context.{l}")
        for n in STEP_LOCAL_STATE.get(rule, ()):   # momentum restarts at zero every step (D7)
            st[n] = torch.zeros(*state_shapes(rule, cfgs[l])[n], dtype=DT)
        states.append(st)

    with torch.enable_grad():
        X = Pm["W_embed"].index_select(0, torch.tensor(ids, dtype=torch.long))
        gates = None
        if freq == "learned":
            m = X.mean(dim=0)
            gvals = [sigmoid(Pl[l]["b_freq"] + Pl[l]["w_freq"] @ m) for l in range(k)]   # [1] each
            gates = [float(g) for g in gvals]
            active = [l == 0 or gates[l] > threshold for l in range(k)]

        def run_levels(U):
            """Each level on U: its rule from the context when active, its frozen read when not."""
            outs, kept = [], []
            for l in range(k):
                rule = levels[l]["rule"]
                if active[l]:
                    y, final = level_forward(rule, U, Pl[l], states[l], cfgs[l])
                    kept.append({n: t for n, t in final.items() if n in state_shapes(rule, cfgs[l])
                                 and n not in STEP_LOCAL_STATE.get(rule, ())})
                else:
                    y = frozen_forward(rule, U, Pl[l], states[l], cfgs[l])
                    kept.append({n: t for n, t in states[l].items() if n not in STEP_LOCAL_STATE.get(rule, ())})
                outs.append(y)
            return outs, kept

        def combine(outs, gated):
            parts = outs if not gated else [StraightThroughUnit.apply(outs[l], gvals[l]) for l in range(k)]
            total = parts[0]
            for p in parts[1:]:
                total = total + p
            return total * (1.0 / math.sqrt(k)) if k > 2 else total

        def attend(U, win):
            return swa(U @ Pm["W_q"].t(), U @ Pm["W_k"].t(), U @ Pm["W_v"].t(), heads, win)

        gated = freq == "learned"
        if pattern == "mag":
            ys, next_ctx = run_levels(X)
            H = attend(X, window) * sigmoid(combine(ys, gated))
        elif pattern == "mal":
            ys, next_ctx = run_levels(X)
            H = attend(X + combine(ys, gated), window)
        else:
            # Read stage from the contexts as they were, before any write; never gated.
            reads = [frozen_forward(levels[l]["rule"], X, Pl[l], states[l], cfgs[l]) for l in range(k)]
            S = torch.cat([Pm["W_persist"], combine(reads, False), X], dim=0)
            Y = attend(S, S.shape[0])[n_p + s:]        # window = every row: full causal attention
            ys, next_ctx = run_levels(Y)
            H = Y * sigmoid(combine(ys, gated))
        logits = (H @ Pm["W_o"].t()) @ Pm["W_unembed"]
        valid = [t for t in range(s) if targets[t] >= 0]
        if valid:
            idx = torch.tensor(valid, dtype=torch.long)
            loss = torch.nn.functional.cross_entropy(logits.index_select(0, idx),
                                                     torch.tensor([targets[t] for t in valid], dtype=torch.long))
        else:
            loss = (logits * 0).sum()
        leaves = list(Pm.values()) + [t for rec in Pl for t in rec.values()]
        gs = torch.autograd.grad(loss, leaves, allow_unused=True)
    gs = [torch.zeros_like(t) if g is None else g for t, g in zip(leaves, gs)]
    gm = dict(zip(Pm.keys(), gs[:len(Pm)]))
    i = len(Pm)
    g_levels, buffers = [], []
    for l in range(k):
        rec = {}
        for n in Pl[l]:
            rec[n] = gs[i]
            i += 1
        if active[l]:
            g_levels.append(rec)
            buffers.append({})
        else:
            step_rec = {n: (g if n in FREQ_PARAMS else torch.zeros_like(g)) for n, g in rec.items()}
            g_levels.append(step_rec)
            buffers.append({"W_Q": rec["W_Q"]})
    return {
        "loss": loss.detach(),
        "grads_model": gm,
        "grads_levels": g_levels,
        "error_buffers": buffers,
        "active": list(active),
        "gates": gates,
        "context": [{n: t.detach() for n, t in c.items()} for c in next_ctx],
        "level_outputs": [y.detach() for y in ys],
    }
