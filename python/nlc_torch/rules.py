"""Torch forwards of every memory rule (active and frozen) and of SWA, written from the math sheets
(docs/spec/titans-family.md, docs/spec/miras-compression.md) and the decisions (docs/spec/decisions.md).

Only FORWARDS live here: every gradient (parameters, level input X, initial state) comes from
torch.autograd. f64 throughout. Nothing is modified in place, so autograd sees the whole graph.

What a rule IS (its key, hyperparameters with defaults and ranges, gates, parameter and state
names and shapes, which initial states are zero, step-local and derived state) is not written
here: it is read from rules_meta.json, which ffi/generate.ts generates from the TypeScript
declarations (docs/spec/names.md#registry). What a rule COMPUTES (the forwards below and the
non-zero initial states) is written here, independently, and cross-checked by C9.

Level machinery (D1, sheets §1.3-§1.4):
    k = X W_K^T, v = X W_V^T, q = X W_Q^T
    Delta/Titans (active path only): k, q <- rows / max(||row||, 1e-8)
    c_t = [k_t; v_t];  alpha = sigmoid(b + w.c), theta = softplus(b + w.c), eta = sigmoid(b + w.c)
    a channel gate (KDA's alpha): alpha_t = sigmoid(b + W c_t), W [d, 2d], b [d]
    Atlas: omega_t = W_omega silu(c_t)
    Comba's p, DPLR's a and b: X W_<P|A|B>^T (normalised as k), passed by keyword
Frozen reads use q = X W_Q^T only (no normalisation) and each rule's own read (D3).
"""
from __future__ import annotations

import json
import math
import os
import struct
from typing import Callable, Dict, List, Optional, Tuple

import torch
import torch.nn.functional as F

DT = torch.float64
Tensor = torch.Tensor
State = Dict[str, Tensor]
Config = Dict[str, object]

NORM_EPS = 1e-8  # L2 row normalisation (sheet 1 §1.2)


class InputError(ValueError):
    """Bad input: the message names the field."""


# ── scalar functions (D6: stable formulas, no saturation cut) ────────────────────────────────

def sigmoid(x: Tensor) -> Tensor:
    return torch.sigmoid(x)


def softplus(x: Tensor) -> Tensor:
    # ln(1 + e^x) = -log(sigmoid(-x)); torch's logsigmoid is max/log1p-stable, and its derivative
    # is exactly sigmoid(x). (F.softplus has a threshold=20 cut, which D6 forbids.)
    return -F.logsigmoid(-x)


def silu(x: Tensor) -> Tensor:
    return x * torch.sigmoid(x)


def silu_prime(x: Tensor) -> Tensor:
    """silu'(x) = s(1 + x(1 - s)), written as a differentiable expression so that autograd
    supplies the silu'' terms of the MLP rules' inner gradient (D2)."""
    s = torch.sigmoid(x)
    return s * (1 + x * (1 - s))


def init_hash(n: int) -> Tensor:
    """README "Fixture details": fround(u32) / 2^32, u32 = (i * 2654435761) mod 2^32, the u32
    rounded to f32 (round to nearest even, via struct's C cast) in both dtypes."""
    out = []
    for i in range(n):
        u = (i * 2654435761) % (1 << 32)
        f32 = struct.unpack("<f", struct.pack("<f", float(u)))[0]
        out.append(f32 / 4294967296.0)
    return torch.tensor(out, dtype=DT)


def l2_rows(x: Tensor) -> Tensor:
    n = torch.linalg.vector_norm(x, dim=1, keepdim=True)
    return x / torch.clamp(n, min=NORM_EPS)


# ── declarations: generated from the TypeScript ones (docs/spec/names.md#registry) ───────────

META_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "rules_meta.json")
with open(META_PATH, encoding="utf-8") as _f:
    META: Dict[str, dict] = {r["key"]: r for r in json.load(_f)["rules"]}

RULE_KEYS: List[str] = list(META)
MEMORY_RULES: List[str] = [k for k, m in META.items() if m["memory"]]
GATES: Dict[str, Tuple[str, ...]] = {k: tuple(m["gates"]) for k, m in META.items()}
NORMALIZE_KQ = {k for k, m in META.items() if m["normalize_kq"]}
# Gates with one value per channel ([s, d]; w_<g> [d, 2d], b_<g> [d]): KDA's alpha, GDN2's three gates, gated Oja's alpha.
CHANNEL_GATES: Dict[str, Tuple[str, ...]] = {k: tuple(m.get("channel_gates", ())) for k, m in META.items()}
# Names a caller may pass in `state` that the rule derives from W1/W2 at call start (ignored).
DERIVED_STATE: Dict[str, Tuple[str, ...]] = {k: tuple(m["derived_state"]) for k, m in META.items()}
# State that restarts at zero on every model step (D7: Titans/Atlas momentum).
STEP_LOCAL_STATE: Dict[str, Tuple[str, ...]] = {k: tuple(m["step_local_state"]) for k, m in META.items()}
# Inner inputs with several rows per token (Gated DeltaProduct's k, v, theta: n_h rows, row t*n_h + j).
TOKEN_ROWS: Dict[str, dict] = {k: m["token_rows"] for k, m in META.items() if "token_rows" in m}


def hyper_defaults(key: str) -> Dict[str, object]:
    return {n: h["default"] for n, h in META[key]["hyper"].items()}


def _dims(shape: List[object], cfg: Config) -> Tuple[int, ...]:
    """A symbolic shape of rules_meta.json: integers, configuration names, `2*<name>` and `<name>*d`."""
    out = []
    for x in shape:
        if isinstance(x, int):
            out.append(x)
        elif x.startswith("2*"):
            out.append(2 * int(cfg[x[2:]]))
        elif x.endswith("*d"):
            out.append(int(cfg[x[:-2]]) * int(cfg["d"]))
        else:
            out.append(int(cfg[x]))
    return tuple(out)


def param_shapes(key: str, cfg: Config) -> Dict[str, Tuple[int, ...]]:
    return {n: _dims(s, cfg) for n, s in META[key]["params"].items()}


def state_shapes(key: str, cfg: Config) -> Dict[str, Tuple[int, ...]]:
    return {n: _dims(s, cfg) for n, s in META[key]["state"].items()}


def _positive_int(v: object) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == int(v) and v >= 1


def resolve_config(key: str, cfg: Config) -> Config:
    """Fills defaults and checks the declared ranges; errors name the field."""
    if key not in META:
        raise InputError(f"rule: unknown rule key '{key}' (known: {', '.join(RULE_KEYS)})")
    out: Dict[str, object] = {}
    for name in ("d", "seq_len"):
        v = cfg.get(name)
        if not _positive_int(v):
            raise InputError(f"config.{name}: expected a positive integer, got {v!r}")
        out[name] = int(v)
    for name, h in META[key]["hyper"].items():
        v = cfg.get(name, h["default"])
        if h["kind"] == "enum":
            if v not in h["values"]:
                raise InputError(f"config.{name}: expected one of {'|'.join(h['values'])}, got {v!r}")
        elif not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) or \
                (h["kind"] == "int" and v != int(v)):
            raise InputError(f"config.{name}: expected {'an integer' if h['kind'] == 'int' else 'a finite number'}, got {v!r}")
        elif not h["min"] <= v <= h["max"]:
            raise InputError(f"config.{name}: {v!r} is outside [{h['min']}, {h['max']}]")
        else:
            v = int(v) if h["kind"] == "int" else float(v)
            bound = h.get("bound_by_d")
            if bound == "at-most" and v > out["d"]:
                raise InputError(f"config.{name}: {v} must be <= d = {out['d']}")
            if bound == "divides" and out["d"] % v != 0:
                raise InputError(f"config.{name}: {v} must divide d = {out['d']}")
        out[name] = v
    for name, v in cfg.items():
        if name not in out and name not in ("d", "seq_len"):
            out[name] = v  # unknown keys are carried, not used
    return out


# ── per-token inner recurrences (active path) ────────────────────────────────────────────────
# Arguments: k, v, q, x [s,d]; gates {name: [s]}, a channel gate [s,d]; omega [s,d] or None; state; cfg.
# Return: y [s,d], final state.

def store(x: Tensor) -> Tensor:
    """A value a kernel stores between its products: x itself, except where a plain reference
    emulates a kernel that keeps such values in its storage dtype (storage.py: storing)."""
    return x


def marks_stored(fn):
    """Declares that a rule's forward marks what a kernel stores (`store`), so the storage emulation
    can run it (docs/spec/precision.md#intermediates); storage.STORING_RULES is read off these marks."""
    fn.marks_stored = True
    return fn


@marks_stored
def _delta(k, v, q, x, g, omega, st, cfg):
    M = st["M"]
    k, q = store(k), store(q)
    ys = []
    for t in range(k.shape[0]):
        e = store(store(store(M) @ k[t]) - v[t])              # L2 bias: psi(e) = e
        # k marked again where the update reads it: its gradient there is a partial dk, stored
        # before the prediction's part is added (docs/spec/precision.md#intermediates)
        M = (1 - g["alpha"][t]) * M - g["theta"][t] * store(torch.outer(e, store(k[t])))
        ys.append(store(store(M) @ q[t]))                     # read after write
    return torch.stack(ys), {"M": M}


_plain_store = store


@marks_stored
def _gated_delta(k, v, q, x, g, omega, st, cfg):
    # Gated DeltaNet as written in its own form: S_t = a_t S_{t-1} (I - beta_t k_t k_t^T) + beta_t v_t k_t^T,
    # with decay a_t = 1 - alpha_t and step beta_t = theta_t (docs/spec/titans-family.md#gated-delta-forward)
    if store is not _plain_store:
        return _gated_delta_stored(k, v, q, g, st)
    M = st["M"]
    eye = torch.eye(k.shape[1], dtype=k.dtype)
    ys = []
    for t in range(k.shape[0]):
        a, beta = 1 - g["alpha"][t], g["theta"][t]
        M = a * M @ (eye - beta * torch.outer(k[t], k[t])) + beta * torch.outer(v[t], k[t])
        ys.append(M @ q[t])
    return torch.stack(ys), {"M": M}


def _gated_delta_stored(k, v, q, g, st):
    # The same recurrence as a kernel computes it, for the storage emulation alone (the plain run
    # keeps the form above): decay, predict from the decayed memory, correct. Marked as in _delta:
    # q and k, the decayed state where the prediction reads it, the prediction, the corrected value
    # e = a M k - v, the update e k^T (k marked again there), the state where y reads it, and y
    # (docs/spec/precision.md#intermediates).
    M = st["M"]
    k, q = store(k), store(q)
    ys = []
    for t in range(k.shape[0]):
        M = (1 - g["alpha"][t]) * M
        e = store(store(store(M) @ k[t]) - v[t])
        M = M - g["theta"][t] * store(torch.outer(e, store(k[t])))
        ys.append(store(store(M) @ q[t]))
    return torch.stack(ys), {"M": M}


@marks_stored
def _gated_delta_product(k, v, q, x, g, omega, st, cfg):
    # Gated DeltaProduct as a product of generalized Householder transitions
    # (docs/spec/titans-family.md#gated-delta-product-forward): per token M <- a_t M with
    # a_t = 1 - alpha_t, then for each of its n_h steps M <- M (I - beta k k^T) + beta v k^T with
    # beta = theta; y_t = M q_t. k, v are [s*n_h, d] and theta [s*n_h], row t*n_h + j for step j
    # (level_forward passes these rows by the metadata's token_rows).
    nh = int(cfg.get("n_h", 2))
    if store is not _plain_store:
        return _gated_delta_product_stored(k, v, q, g, st, nh)
    M = st["M"]
    eye = torch.eye(k.shape[1], dtype=k.dtype)
    ys = []
    for t in range(q.shape[0]):
        M = (1 - g["alpha"][t]) * M
        for j in range(nh):
            r, beta = t * nh + j, g["theta"][t * nh + j]
            M = M @ (eye - beta * torch.outer(k[r], k[r])) + beta * torch.outer(v[r], k[r])
        ys.append(M @ q[t])
    return torch.stack(ys), {"M": M}


def _gated_delta_product_stored(k, v, q, g, st, nh):
    # As _gated_delta_stored, one decay per token and then each of its n_h corrections marked as
    # Gated Delta's one (docs/spec/precision.md#intermediates).
    M = st["M"]
    k, q = store(k), store(q)
    ys = []
    for t in range(q.shape[0]):
        M = (1 - g["alpha"][t]) * M
        for j in range(nh):
            r = t * nh + j
            e = store(store(store(M) @ k[r]) - v[r])
            M = M - g["theta"][r] * store(torch.outer(e, store(k[r])))
        ys.append(store(store(M) @ q[t]))
    return torch.stack(ys), {"M": M}


@marks_stored
def _kda(k, v, q, x, g, omega, st, cfg):
    # KDA in the key-major form of its own papers and fla (docs/spec/titans-family.md#kda-forward):
    # S = M^T is [d_k, d_v]; S <- diag(a_t) S with a_t = 1 - alpha_t per key channel, then
    # S <- S + beta_t k_t (v_t - S^T k_t)^T, o_t = S^T q_t; beta_t = theta_t.
    if store is not _plain_store:
        return _kda_stored(k, v, q, g, st)
    S = st["M"].t()
    ys = []
    for t in range(k.shape[0]):
        S = (1 - g["alpha"][t]).unsqueeze(1) * S
        S = S + g["theta"][t] * torch.outer(k[t], v[t] - S.t() @ k[t])
        ys.append(S.t() @ q[t])
    return torch.stack(ys), {"M": S.t()}


def _kda_stored(k, v, q, g, st):
    # As _gated_delta_stored, the decay per key channel (a column of M): for the storage emulation.
    M = st["M"]
    k, q = store(k), store(q)
    ys = []
    for t in range(k.shape[0]):
        M = M * (1 - g["alpha"][t]).unsqueeze(0)
        e = store(store(store(M) @ k[t]) - v[t])
        M = M - g["theta"][t] * store(torch.outer(e, store(k[t])))
        ys.append(store(store(M) @ q[t]))
    return torch.stack(ys), {"M": M}


@marks_stored
def _gdn2(k, v, q, x, g, omega, st, cfg):
    # GDN2 in fla's key-major form (docs/spec/delta-family-2.md#gdn2-forward): S = M^T [d_k, d_v];
    # S <- diag(a_t) S with a_t = 1 - alpha_t per key channel, then S <- S + k_t (w_t * v_t - S^T (b_t * k_t))^T,
    # o_t = S^T q_t; the erase gate b_t = theta_t per key channel, the write gate w_t = eta_t per value channel.
    if store is not _plain_store:
        return _gdn2_stored(k, v, q, g, st)
    S = st["M"].t()
    ys = []
    for t in range(k.shape[0]):
        S = (1 - g["alpha"][t]).unsqueeze(1) * S
        S = S + torch.outer(k[t], g["eta"][t] * v[t] - S.t() @ (g["theta"][t] * k[t]))
        ys.append(S.t() @ q[t])
    return torch.stack(ys), {"M": S.t()}


def _gdn2_stored(k, v, q, g, st):
    # As _kda_stored, the key the state is read with scaled by the erase gate and the value by the write gate.
    M = st["M"]
    k, q = store(k), store(q)
    ys = []
    for t in range(k.shape[0]):
        M = M * (1 - g["alpha"][t]).unsqueeze(0)
        e = store(store(store(M) @ (g["theta"][t] * k[t])) - g["eta"][t] * v[t])
        M = M - store(torch.outer(e, store(k[t])))
        ys.append(store(store(M) @ q[t]))
    return torch.stack(ys), {"M": M}


@marks_stored
def _gated_oja(k, v, q, x, g, omega, st, cfg):
    # The gated Oja rule in fla's form (docs/spec/delta-family-2.md#gated-oja-forward): h = M^T [d_k, d_v];
    # h <- h diag(a_t) with a_t = 1 - alpha_t per value channel, then h <- h + beta_t (k_t - h v_t) v_t^T,
    # o_t = h^T q_t; beta_t = theta_t.
    if store is not _plain_store:
        return _gated_oja_stored(k, v, q, g, st)
    h = st["M"].t()
    ys = []
    for t in range(k.shape[0]):
        h = h * (1 - g["alpha"][t]).unsqueeze(0)
        h = h + g["theta"][t] * torch.outer(k[t] - h @ v[t], v[t])
        ys.append(h.t() @ q[t])
    return torch.stack(ys), {"M": h.t()}


def _gated_oja_stored(k, v, q, g, st):
    # As _kda_stored, in M = h^T: the decay per value channel (a row of M), the reconstruction
    # e = M^T v - k of the decayed state, then M <- M - beta v e^T.
    M = st["M"]
    k, q, v = store(k), store(q), store(v)
    ys = []
    for t in range(k.shape[0]):
        M = (1 - g["alpha"][t]).unsqueeze(1) * M
        e = store(store(store(M).t() @ v[t]) - k[t])
        M = M - g["theta"][t] * store(torch.outer(store(v[t]), e))
        ys.append(store(store(M) @ q[t]))
    return torch.stack(ys), {"M": M}


@marks_stored
def _comba(k, v, q, x, g, omega, st, cfg, p=None):
    # Comba in the key-major form of fla's fused_recurrent_comba (docs/spec/titans-family.md#comba-forward):
    # S = M^T [d_k, d_v]; the correction reads the state before it decays, with the second key p:
    # u_t = beta_t (v_t - S^T p_t);  S <- a_t S + k_t u_t^T;  o_t = S^T q_t;  a_t = 1 - alpha_t, beta_t = theta_t.
    if p is None:
        raise InputError("in.p: rule 'comba' reads a second key p")
    if store is not _plain_store:
        return _comba_stored(k, v, q, p, g, st)
    S = st["M"].t()
    ys = []
    for t in range(k.shape[0]):
        u = g["theta"][t] * (v[t] - S.t() @ p[t])
        S = (1 - g["alpha"][t]) * S + torch.outer(k[t], u)
        ys.append(S.t() @ q[t])
    return torch.stack(ys), {"M": S.t()}


@marks_stored
def _dplr(k, v, q, x, g, omega, st, cfg, a=None, b=None):
    # DPLR in the key-major form of fla's dplr_recurrence (docs/spec/titans-family.md#dplr-forward):
    # S = M^T [d_k, d_v];  S <- diag(w_t) S + b_t (a_t^T S) + k_t v_t^T with a^T S read from the state
    # before it decays;  o_t = S^T q_t;  w_t = 1 - alpha_t per key channel.
    if a is None or b is None:
        raise InputError("in.a, in.b: rule 'dplr' reads the low-rank vectors a and b")
    if store is not _plain_store:
        return _dplr_stored(k, v, q, a, b, g, st)
    S = st["M"].t()
    ys = []
    for t in range(k.shape[0]):
        S = (1 - g["alpha"][t]).unsqueeze(1) * S + torch.outer(b[t], a[t] @ S) + torch.outer(k[t], v[t])
        ys.append(S.t() @ q[t])
    return torch.stack(ys), {"M": S.t()}


def _comba_stored(k, v, q, p, g, st):
    # As _gated_delta_stored, in M = S^T: the correction reads the undecayed state with p, e = M p - v
    # (u = -beta e), then M <- a M - beta e k^T. Marked: q, k, p, the state where p reads it, the
    # prediction, e, the update (k marked again), the state where y reads it, and y.
    M = st["M"]
    k, q, p = store(k), store(q), store(p)
    ys = []
    for t in range(k.shape[0]):
        e = store(store(store(M) @ p[t]) - v[t])
        M = (1 - g["alpha"][t]) * M - g["theta"][t] * store(torch.outer(e, store(k[t])))
        ys.append(store(store(M) @ q[t]))
    return torch.stack(ys), {"M": M}


def _dplr_stored(k, v, q, a, b, g, st):
    # As _gated_delta_stored, in M = S^T: M <- M diag(w) + (M a) b^T + v k^T, M a read before the
    # decay. Marked: q, k, a, b, the state where a and q read it, M a, and the two rank-one updates, y.
    M = st["M"]
    k, q, a, b = store(k), store(q), store(a), store(b)
    ys = []
    for t in range(k.shape[0]):
        r = store(store(M) @ a[t])
        M = M * (1 - g["alpha"][t]).unsqueeze(0) + store(torch.outer(r, b[t])) + store(torch.outer(v[t], k[t]))
        ys.append(store(store(M) @ q[t]))
    return torch.stack(ys), {"M": M}


def _titans(k, v, q, x, g, omega, st, cfg):
    M, S = st["M"], st["S"]
    ys = []
    for t in range(k.shape[0]):
        e = M @ k[t] - v[t]
        S = g["eta"][t] * S - g["theta"][t] * torch.outer(e, k[t])   # EMA momentum
        M = (1 - g["alpha"][t]) * M + S
        ys.append(M @ q[t])
    return torch.stack(ys), {"M": M, "S": S}


def _hebbian(k, v, q, x, g, omega, st, cfg):
    M = st["M"]
    ys = []
    for t in range(k.shape[0]):
        M = (1 - g["alpha"][t]) * M + torch.outer(v[t], k[t])
        ys.append(M @ q[t])
    return torch.stack(ys), {"M": M}


def _atlas(k, v, q, x, g, omega, st, cfg):
    M, S = st["M"], st["S"]
    ys = []
    for t in range(k.shape[0]):
        S = g["eta"][t] * S - g["theta"][t] * torch.outer(omega[t], k[t])  # state-independent direction
        M = (1 - g["alpha"][t]) * M + S
        ys.append(M @ q[t])
    return torch.stack(ys), {"M": M, "S": S}


def _mlp_read(W1: Tensor, W2: Tensor, q: Tensor) -> Tensor:
    return W2 @ silu(W1 @ q)


def _mlp_inner_grad(W1, W2, k, v, psi: Callable[[Tensor], Tensor]):
    """The inner gradient of the 2-layer MLP memory at (W1, W2) for key k, value v, with the
    attentional bias psi applied to the error (sheet 2 §2.4): G1 = (W2^T g ⊙ silu'(a)) k^T, G2 = g h^T."""
    a = W1 @ k
    h = silu(a)
    e = W2 @ h - v
    gg = psi(e)
    G2 = torch.outer(gg, h)
    u = (W2.t() @ gg) * silu_prime(a)
    G1 = torch.outer(u, k)
    return G1, G2, e


def lp_bias(p: float, a: float) -> Callable[[Tensor], Tensor]:
    """Sheet 2 §2.3 dispatch; p = 2 keeps the factor 2."""
    if abs(p - 2) < 1e-6:
        return lambda e: 2 * e
    if abs(p - 1) < 1e-6:
        return lambda e: torch.tanh(a * e)
    return lambda e: p * torch.tanh(a * e) * torch.pow(e * e + 1e-6, (p - 1) / 2)


def lq_normalize(A: Tensor, q: float) -> Tensor:
    """Sheet 2 §2.5: N_q(A) = A / n^{q-2}, n = (sum (A^2 + 1e-12)^{q/2})^{1/q}; A where n^{q-2} < 1e-30."""
    n = torch.pow(torch.pow(A * A + 1e-12, q / 2).sum(), 1.0 / q)
    s = torch.pow(n, q - 2)
    if float(s) < 1e-30:
        return A
    return A / s


def _moneta(k, v, q, x, g, omega, st, cfg):
    p, lq, l2, a = float(cfg["p"]), float(cfg["q"]), float(cfg["lambda_2"]), float(cfg["sign_sharpness"])
    psi = lp_bias(p, a)
    l2path = abs(lq - 2) < 1e-6
    W1, W2 = st["W1"], st["W2"]
    A1, A2 = W1, W2            # A_0 = W_0 at the start of every call (README "Fixture details")
    ys = []
    for t in range(k.shape[0]):
        al, th = g["alpha"][t], g["theta"][t]
        G1, G2, _ = _mlp_inner_grad(W1, W2, k[t], v[t], psi)
        if l2path:
            W1, W2 = al * W1 - th * (G1 + 2 * l2 * W1), al * W2 - th * (G2 + 2 * l2 * W2)
        else:
            A1 = al * A1 - th * (G1 + 2 * l2 * W1)       # G and the lambda term at the normalised W_t
            A2 = al * A2 - th * (G2 + 2 * l2 * W2)
            W1, W2 = lq_normalize(A1, lq), lq_normalize(A2, lq)
        ys.append(_mlp_read(W1, W2, q[t]))                # read after write
    final = {"W1": W1, "W2": W2}
    if not l2path:
        final.update({"A1": A1, "A2": A2})
    return torch.stack(ys), final


def _yaad(k, v, q, x, g, omega, st, cfg):
    delta, lloc, l2 = float(cfg["delta"]), float(cfg["lambda_local"]), float(cfg["lambda_2"])

    def huber(e):  # |e| = delta takes the clipped branch (sheet 2 §3.3)
        return torch.where(e.abs() < delta, e, delta * torch.sign(e))

    W1, W2 = st["W1"], st["W2"]
    B1, B2 = W1, W2            # boundary snapshot: the state at the start of this call
    ys = []
    for t in range(k.shape[0]):
        al, th = g["alpha"][t], g["theta"][t]
        G1, G2, _ = _mlp_inner_grad(W1, W2, k[t], v[t], huber)
        W1, W2 = (al * W1 - th * (G1 + 2 * lloc * (W1 - B1) + 2 * l2 * W1),
                  al * W2 - th * (G2 + 2 * lloc * (W2 - B2) + 2 * l2 * W2))
        ys.append(_mlp_read(W1, W2, q[t]))
    return torch.stack(ys), {"W1": W1, "W2": W2, "B1": B1, "B2": B2}


def _logc(w: Tensor) -> Tensor:
    return torch.log(torch.clamp(w, min=1e-8))


def _memora(k, v, q, x, g, omega, st, cfg):
    W1, W2 = st["W1"], st["W2"]
    ys = []
    for t in range(k.shape[0]):
        al, th = g["alpha"][t], g["theta"][t]
        ys.append(_mlp_read(W1, W2, q[t]))                # read BEFORE write
        G1, G2, _ = _mlp_inner_grad(W1, W2, k[t], v[t], lambda e: e)   # L2 bias, no factor 2
        W1 = torch.softmax(al * _logc(W1) - th * G1, dim=1)
        W2 = torch.softmax(al * _logc(W2) - th * G2, dim=1)
    return torch.stack(ys), {"W1": W1, "W2": W2}


def _lattice_read(S: Tensor, q: Tensor) -> Tensor:
    w = torch.softmax(S @ q, dim=0)
    return w @ S


def _lattice(k, v, q, x, g, omega, st, cfg):
    variant = cfg["variant"]
    S = st["S"]
    ys = []
    for t in range(k.shape[0]):
        ys.append(_lattice_read(S, q[t]))                 # read BEFORE write
        gamma = sigmoid(S @ k[t])                         # [m] slot gates
        if variant == "decode":
            u = v[t].expand_as(S)
        elif variant == "encode":
            u = k[t].expand_as(S)
        else:
            u = v[t] - (S @ v[t])[:, None] * S
        delta = g["alpha"][t] * gamma[:, None] * u
        p = (S * delta).sum(dim=1)
        ut = (1 - p)[:, None] * S + delta                 # tangent-plane step
        n = torch.linalg.vector_norm(ut, dim=1, keepdim=True)
        ok = n > 1e-8
        S = torch.where(ok, ut / torch.where(ok, n, torch.ones_like(n)), S)   # fallback: keep the slot
    return torch.stack(ys), {"S": S}


# ── the linear-attention family (docs/spec/linear-attention.md) ─────────────────────────────

def _gla(k, v, q, x, g, omega, st, cfg):
    # GLA in the key-major form of fla (docs/spec/linear-attention.md#gla-forward): S = M^T is
    # [d_k, d_v]; S <- diag(exp g_t) S + k_t v_t^T with exp g_t = 1 - alpha_t per key channel,
    # then o_t = S^T q_t (read after the write).
    S = st["M"].t()
    ys = []
    for t in range(k.shape[0]):
        S = (1 - g["alpha"][t]).unsqueeze(1) * S + torch.outer(k[t], v[t])
        ys.append(S.t() @ q[t])
    return torch.stack(ys), {"M": S.t()}


def _rwkv6(k, v, q, x, g, omega, st, cfg):
    # RWKV-6 in the key-major form of fla's fused_recurrent_rwkv6 (docs/spec/linear-attention.md#rwkv6-forward):
    # S = M^T [d_k, d_v]; o_t = (S + diag(u_t) k_t v_t^T)^T r_t with r = q and the bonus u = theta,
    # read before the write; then S <- diag(exp w_t) S + k_t v_t^T with exp w_t = 1 - alpha_t.
    S = st["M"].t()
    ys = []
    for t in range(k.shape[0]):
        ys.append((S + torch.outer(g["theta"][t] * k[t], v[t])).t() @ q[t])
        S = (1 - g["alpha"][t]).unsqueeze(1) * S + torch.outer(k[t], v[t])
    return torch.stack(ys), {"M": S.t()}


def nsilu(u: Tensor) -> Tensor:
    """Sheet 2 §6.3: sqrt(dk) silu(u) / ||silu(u)||, the zero vector when the norm <= 1e-8."""
    s = silu(u)
    n = torch.linalg.vector_norm(s)
    if not float(n) > 1e-8:
        return torch.zeros_like(u)
    return math.sqrt(u.shape[0]) * s / n


def _trellis(k, v, q, x, g, omega, st, cfg):
    lk, lv = float(cfg["lambda_k"]), float(cfg["lambda_v"])
    SK, SV = st["S_K"], st["S_V"]
    dk = SK.shape[0]
    ys = []
    for t in range(k.shape[0]):
        al, th = g["alpha"][t], g["theta"][t]
        ys.append(SV @ nsilu(SK @ q[t]))                  # read BEFORE write
        ek = SK @ x[t] - k[t][:dk]                        # pass 1: target = first dk comps of k
        SK_new = (1 - al) * SK - th * (torch.outer(ek, x[t]) + lk * SK)   # lambda, not 2 lambda
        c = nsilu(SK_new @ x[t])                          # pass 2 uses the UPDATED S_K
        ev = SV @ c - v[t]
        SV = (1 - al) * SV - th * (torch.outer(ev, c) + lv * SV)
        SK = SK_new
    return torch.stack(ys), {"S_K": SK, "S_V": SV}


def _ttt_inner_grad(z: Tensor, k: Tensor, v: Tensor, w: Tensor, b: Tensor, eps: float) -> Tensor:
    """docs/spec/ttt.md#ttt-objective: du of l = 1/2 ||w LN(z) + b - (v - k)||^2 at z, by autograd,
    kept in the graph (create_graph) so the outer gradients see its second order."""
    outer = torch.is_grad_enabled()
    zz = z if z.requires_grad else z.detach().requires_grad_(True)
    with torch.enable_grad():
        loss = 0.5 * ((w * F.layer_norm(zz, zz.shape, eps=eps) + b - (v - k)) ** 2).sum()
        (u,) = torch.autograd.grad(loss, zz, create_graph=outer)
    return u


def _ttt_out(o: Tensor, w: Tensor, b: Tensor, eps: float) -> Tensor:
    """Output LayerNorm with residual, the same w, b (docs/spec/ttt.md#ttt-linear)."""
    return o + w * F.layer_norm(o, o.shape, eps=eps) + b


def _ttt_linear(k, v, q, x, g, omega, st, cfg):
    """docs/spec/ttt.md#ttt-linear, one token per mini-batch: M <- M - theta u k^T, m <- m - theta u."""
    M, m, w, b, eps = st["M"], st["M_b"], st["ln_w"], st["ln_b"], float(cfg["eps"])
    ys = []
    for t in range(k.shape[0]):
        u = _ttt_inner_grad(M @ k[t] + m, k[t], v[t], w, b, eps)
        M = M - g["theta"][t] * torch.outer(u, k[t])
        m = m - g["theta"][t] * u
        ys.append(_ttt_out(M @ q[t] + m, w, b, eps))
    return torch.stack(ys), {"M": M, "M_b": m, "ln_w": w, "ln_b": b}


def _titans_linear(k, v, q, x, g, omega, st, cfg):
    """docs/spec/ttt.md#titans-linear: l = ||w LN(M k) + b - (v - k)||^2 (no 1/2), EMA momentum, decay."""
    M, S, w, b, eps = st["M"], st["S"], st["ln_w"], st["ln_b"], float(cfg["eps"])
    ys = []
    for t in range(k.shape[0]):
        grad = 2 * torch.outer(_ttt_inner_grad(M @ k[t], k[t], v[t], w, b, eps), k[t])
        S = g["eta"][t] * S - g["theta"][t] * grad
        M = (1 - g["alpha"][t]) * M + S
        ys.append(_ttt_out(M @ q[t], w, b, eps))
    return torch.stack(ys), {"M": M, "S": S, "ln_w": w, "ln_b": b}


INNER = {
    "delta": _delta, "titans": _titans, "hebbian": _hebbian, "atlas": _atlas, "moneta": _moneta,
    "yaad": _yaad, "memora": _memora, "lattice": _lattice, "trellis": _trellis, "gated_delta": _gated_delta,
    "kda": _kda, "comba": _comba, "dplr": _dplr, "gated_delta_product": _gated_delta_product,
    # the linear-attention family
    "gla": _gla, "rwkv6": _rwkv6,
    "gdn2": _gdn2, "gated_oja": _gated_oja,
    "ttt_linear": _ttt_linear, "titans_linear": _titans_linear,
}


# ── frozen reads (D3: each rule's own read of its state) ─────────────────────────────────────

def _matrix_read(q: Tensor, st: State, cfg: Config) -> Tensor:
    return q @ st["M"].t()                                           # y_t = M q_t


def _mlp_frozen_read(q: Tensor, st: State, cfg: Config) -> Tensor:
    return silu(q @ st["W1"].t()) @ st["W2"].t()                     # y_t = W2 silu(W1 q_t)


def _lattice_frozen_read(q: Tensor, st: State, cfg: Config) -> Tensor:
    S = st["S"]
    return torch.softmax(q @ S.t(), dim=1) @ S                       # y_t = sum_i softmax(S q_t)_i S_i


def _trellis_frozen_read(q: Tensor, st: State, cfg: Config) -> Tensor:
    return torch.stack([st["S_V"] @ nsilu(st["S_K"] @ q[t]) for t in range(q.shape[0])])


def _ttt_frozen_read(q: Tensor, st: State, cfg: Config) -> Tensor:
    eps = float(cfg["eps"])
    return torch.stack([_ttt_out(st["M"] @ q[t] + st["M_b"], st["ln_w"], st["ln_b"], eps) for t in range(q.shape[0])])


def _titans_linear_frozen_read(q: Tensor, st: State, cfg: Config) -> Tensor:
    eps = float(cfg["eps"])
    return torch.stack([_ttt_out(st["M"] @ q[t], st["ln_w"], st["ln_b"], eps) for t in range(q.shape[0])])


FROZEN = {
    "delta": _matrix_read, "titans": _matrix_read, "hebbian": _matrix_read, "atlas": _matrix_read,
    "gated_delta": _matrix_read, "moneta": _mlp_frozen_read, "yaad": _mlp_frozen_read, "memora": _mlp_frozen_read,
    "lattice": _lattice_frozen_read, "trellis": _trellis_frozen_read,
    "kda": _matrix_read, "comba": _matrix_read, "dplr": _matrix_read, "gated_delta_product": _matrix_read,
    # the linear-attention family
    "gla": _matrix_read, "rwkv6": _matrix_read,
    "gdn2": _matrix_read, "gated_oja": _matrix_read,
    "ttt_linear": _ttt_frozen_read, "titans_linear": _titans_linear_frozen_read,
}


def _frozen_read(key: str, q: Tensor, st: State, cfg: Config) -> Tensor:
    if key not in FROZEN:
        raise InputError(f"rule: '{key}' has no frozen read in the PyTorch reference (python/nlc_torch/rules.py FROZEN)")
    return FROZEN[key](q, st, cfg)


# ── initial states (D4) that are not zero; the zero ones are read from the declarations ──────

def _hash_mlp_init(cfg: Config) -> State:
    d, dh = int(cfg["d"]), int(cfg["d_hidden"])
    c = 0.1 * math.sqrt(2.0 / (d + dh))
    return {"W1": (c * (init_hash(dh * d) - 0.5)).reshape(dh, d)}


def _memora_init(cfg: Config) -> State:
    d, dh = int(cfg["d"]), int(cfg["d_hidden"])
    W1 = torch.softmax((0.1 * (init_hash(dh * d) - 0.5)).reshape(dh, d), dim=1)
    return {"W1": W1, "W2": torch.full((d, dh), 1.0 / dh, dtype=DT)}


def _lattice_init(cfg: Config) -> State:
    d, m = int(cfg["d"]), int(cfg["m_slots"])
    S = (init_hash(m * d) - 0.5).reshape(m, d)
    n = torch.linalg.vector_norm(S, dim=1, keepdim=True)
    return {"S": torch.where(n > 1e-8, S / torch.where(n > 1e-8, n, torch.ones_like(n)), S)}


def _ttt_init(cfg: Config) -> State:
    """docs/spec/decisions.md#ttt-init: M = I, ln_w = 1 (the other states zero); Titans-linear's too."""
    d = int(cfg["d"])
    return {"M": torch.eye(d, dtype=DT), "ln_w": torch.ones(d, dtype=DT)}


INIT = {"moneta": _hash_mlp_init, "yaad": _hash_mlp_init, "memora": _memora_init, "lattice": _lattice_init,
        "ttt_linear": _ttt_init, "titans_linear": _ttt_init}


def init_state(key: str, cfg: Config) -> State:
    """D4 initial states: zeros where the declaration's init is zero, else the rule's own formula."""
    own = None
    out: State = {}
    for name, shape in state_shapes(key, cfg).items():
        if META[key]["init"][name] == "zeros":
            out[name] = torch.zeros(*shape, dtype=DT)
            continue
        if key not in INIT:
            raise InputError(f"rule: the PyTorch reference has no initial state of '{key}' (python/nlc_torch/rules.py INIT)")
        own = own if own is not None else INIT[key](cfg)
        out[name] = own[name]
    return out


# ── SWA (sheet 1 §7) ─────────────────────────────────────────────────────────────────────────

def swa(Q: Tensor, K: Tensor, V: Tensor, heads: int, window: int) -> Tensor:
    s, d = Q.shape
    hd = d // heads
    i = torch.arange(s)[:, None]
    j = torch.arange(s)[None, :]
    allowed = (j <= i) & (j > i - window)
    outs = []
    for h in range(heads):
        sl = slice(h * hd, (h + 1) * hd)
        scores = (Q[:, sl] @ K[:, sl].t()) / math.sqrt(hd)
        P = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=1)
        outs.append(P @ V[:, sl])
    return torch.cat(outs, dim=1)


def _swa_level(X: Tensor, P: Dict[str, Tensor], st: State, cfg: Config) -> Tuple[Tensor, State]:
    return swa(X @ P["W_q"].t(), X @ P["W_k"].t(), X @ P["W_v"].t(), int(cfg["heads"]), int(cfg["window"])), {}


# Rules whose projection is attention: the whole level, not an inner recurrence.
ATTENTION = {"swa": _swa_level}


def implemented_rules() -> List[str]:
    """The rule variants this reference has forwards for (a declared rule may not have one yet)."""
    active = [k for k in RULE_KEYS if k in INNER or k in ATTENTION]
    return active + [f"{k}.frozen" for k in RULE_KEYS if META[k]["frozen"] and k in FROZEN]


# ── whole level ──────────────────────────────────────────────────────────────────────────────

def level_forward(key: str, X: Tensor, P: Dict[str, Tensor], st: State, cfg: Config) -> Tuple[Tensor, State]:
    """Active path of one level (or SWA): returns y [s,d] and the final state."""
    if key not in INNER and key not in ATTENTION:
        raise InputError(f"rule: the PyTorch reference has no forward of '{key}' (python/nlc_torch/rules.py INNER)")
    if META[key]["projection"] == "attention":
        return ATTENTION[key](X, P, st, cfg)
    # n rows per token of k and v (token_rows: W_K, W_V [n*d, d]), as [s*n, d], row t*n + j
    rows = TOKEN_ROWS.get(key)
    n = int(cfg[rows["hyper"]]) if rows else 1
    s, d = X.shape
    k = (X @ P["W_K"].t()).reshape(s * n, d)
    v = (X @ P["W_V"].t()).reshape(s * n, d)
    q = X @ P["W_Q"].t()
    if key in NORMALIZE_KQ:
        k, q = l2_rows(k), l2_rows(q)
    c_rows = torch.cat([k, v], dim=1)                 # c_t = [k_t; v_t], k first; one per row
    c = c_rows[::n]                                   # the token's first row (every row when n = 1)
    gate_fn = {"alpha": sigmoid, "theta": softplus, "eta": sigmoid}
    row_gates = rows["inputs"] if rows else ()
    # a channel gate (KDA's alpha): one row of w and one entry of b per key channel, [s, d];
    # a row gate (token_rows' theta): one value per row from that row's [k; v], [s*n]
    gates = {name: gate_fn[name]((c_rows if name in row_gates else c) @ P[f"w_{name}"].t() + P[f"b_{name}"])
             if name in CHANNEL_GATES[key]
             else gate_fn[name]((c_rows if name in row_gates else c) @ P[f"w_{name}"] + P[f"b_{name}"][0]) for name in GATES[key]}
    omega = silu(c) @ P["W_omega"].t() if META[key]["omega"] else None
    # Comba's p, DPLR's a and b: X W_<P|A|B>^T, normalised as k is; passed by name
    aux = {n: X @ P[f"W_{n.upper()}"].t() for n in META[key].get("aux_inputs", [])}
    aux = {n: l2_rows(t) if key in NORMALIZE_KQ else t for n, t in aux.items()}
    return INNER[key](k, v, q, X, gates, omega, st, cfg, **aux)


def frozen_forward(key: str, X: Tensor, P: Dict[str, Tensor], st: State, cfg: Config) -> Tensor:
    """Frozen read of one level: q = X W_Q^T without normalisation (D1), then the rule's read."""
    return _frozen_read(key, X @ P["W_Q"].t(), st, cfg)


def resolve_state(key: str, cfg: Config, given: Dict[str, Tensor], where: str = "state") -> State:
    """The call's initial state: given entries, the rule's init (D4) for absent ones; derived
    names (Moneta A1/A2, YAAD B1/B2) are ignored; anything else is an error."""
    shapes = state_shapes(key, cfg)
    for name, t in given.items():
        if name in DERIVED_STATE.get(key, ()):
            continue
        if name not in shapes:
            raise InputError(f"{where}.{name}: rule '{key}' has no state '{name}' (expected {', '.join(shapes) or 'none'})")
        if tuple(t.shape) != shapes[name]:
            raise InputError(f"{where}.{name}: expected shape {list(shapes[name])}, got {list(t.shape)}")
    init = None
    out: State = {}
    for name in shapes:
        if name in given:
            out[name] = given[name]
        else:
            init = init if init is not None else init_state(key, cfg)
            out[name] = init[name]
    return out


def check_params(key: str, cfg: Config, params: Dict[str, Tensor], where: str = "params") -> None:
    shapes = param_shapes(key, cfg)
    for name, shape in shapes.items():
        if name not in params:
            raise InputError(f"{where}.{name}: missing")
        if tuple(params[name].shape) != shape:
            raise InputError(f"{where}.{name}: expected shape {list(shape)}, got {list(params[name].shape)}")


def run_rule(key: str, frozen: bool, cfg_in: Config, X: Tensor, dy: Tensor, params: Dict[str, Tensor],
             state: Optional[Dict[str, Tensor]]) -> Dict[str, Dict[str, Tensor]]:
    """One rule case: y, final state and, for loss = sum(y * dy), the gradients of X, of every
    parameter (zero where unused) and of the initial state (all by autograd)."""
    cfg = resolve_config(key, cfg_in)
    s, d = int(cfg["seq_len"]), int(cfg["d"])
    if frozen and not META[key]["frozen"]:
        raise InputError(f"frozen: '{key}' has no frozen variant")
    variant = f"{key}.frozen" if frozen else key
    if variant not in implemented_rules():
        raise InputError(f"rule: the PyTorch reference has no forward of '{variant}' (python/nlc_torch/rules.py)")
    for name, t, shape in (("X", X, (s, d)), ("dy", dy, (s, d))):
        if t is None:
            raise InputError(f"{name}: missing")
        if tuple(t.shape) != shape:
            raise InputError(f"{name}: expected shape {list(shape)}, got {list(t.shape)}")
    check_params(key, cfg, params)
    extra = set(params) - set(param_shapes(key, cfg))
    if extra:
        raise InputError(f"params.{sorted(extra)[0]}: rule '{key}' has no parameter of that name")
    st0 = resolve_state(key, cfg, state or {})

    X = X.detach().to(DT).clone().requires_grad_(True)
    dy = dy.detach().to(DT)
    P = {n: t.detach().to(DT).clone().requires_grad_(True) for n, t in params.items()}
    S0 = {n: t.detach().to(DT).clone().requires_grad_(True) for n, t in st0.items()}
    with torch.enable_grad():
        if frozen:
            y = frozen_forward(key, X, P, S0, cfg)
            final = {n: t for n, t in S0.items()}
        else:
            y, final = level_forward(key, X, P, S0, cfg)
        loss = (y * dy).sum()
        leaves: List[Tensor] = [X] + list(P.values()) + list(S0.values())
        gs = torch.autograd.grad(loss, leaves, allow_unused=True)
    grads = [torch.zeros_like(l) if g is None else g for l, g in zip(leaves, gs)]
    names = ["X"] + list(P.keys())
    return {
        "y": {"y": y.detach()},
        "state": {n: t.detach().clone() for n, t in final.items()},
        "grads": {n: g for n, g in zip(names, grads[:len(names)])},
        "state_grads": {n: g for n, g in zip(S0.keys(), grads[len(names):])},
    }
