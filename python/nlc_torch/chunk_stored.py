"""The exact chunked (WY) form of Delta and Gated Delta with a chunked kernel's stored values marked:
the storage-intermediates yardstick of a kernel that declares a chunk size
(docs/spec/precision.md#intermediates-chunked).

The same function as the per-token rule (docs/spec/chunk-forms.md#exact-chunked), reassociated as
a chunked kernel computes it. Per chunk of L tokens with starting state S₀ ([d_v, d_k], y = S q),
decays a_t = 1 − α_t, steps β_t = θ_t:

    S_t = a_t S_{t−1} + δ_t k_tᵀ,   δ_t = β_t (v_t − b_t S_{t−1} k_t)
          b_t = a_t (gated_delta: decay, then correct) or 1 (delta: correct the undecayed state)
    R[t,i] = Π_{i<j≤t} a_j,  γ_t = Π_{j≤t} a_j,  c_t = b_t Π_{j<t} a_j
    ρ[t,i] = b_t Π_{i<j<t} a_j  (i < t)
    (I + strict_tril(diag(β) (ρ ⊙ K Kᵀ))) Δ = diag(β) V − diag(β c) K S₀ᵀ
    T = (I + strict_tril(…))⁻¹,  w = T (β c ⊙ K),  u = T (β ⊙ V),  Δ = v_new = u − w S₀ᵀ
    y = diag(γ) Q S₀ᵀ + tril(R ⊙ Q Kᵀ) Δ,   S_L = γ_L S₀ + Δᵀ diag(R[L−1, ·]) K

Marked with `rules.store` where a chunked kernel (fla's chunk_delta_rule, chunk_gated_delta_rule)
stores a value in its storage dtype: q and k, the inverse T, β c ⊙ K and β ⊙ V as the products read
them, w and u, the chunk state where the products read it, v_new, tril(R ⊙ Q Kᵀ) and y. The state
carried from chunk to chunk stays in f32 (a kernel keeps it in f32 registers and hands it on). The
decay products are formed by cumulative products, not by differences of log-decays, so a = 0 is exact.
"""
from __future__ import annotations

from typing import Dict, Tuple

import torch
from torch import Tensor

from . import rules

# rule -> whether the prediction reads the decayed state (b_t = a_t) or the undecayed one (b_t = 1)
CHUNKED_RULES = {"gated_delta": True, "delta": False}


def _decays(a: Tensor, decay_first: bool) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    """R [L, L] (R[t,i] = Π_{i<j≤t} a_j, zero above the diagonal), ρ [L, L] (strictly lower), γ [L], c [L]."""
    L = a.shape[0]
    t = torch.arange(L).unsqueeze(1)
    i = torch.arange(L).unsqueeze(0)
    one = torch.ones((), dtype=a.dtype)
    R = torch.cumprod(torch.where(t > i, a.unsqueeze(1).expand(L, L), one), 0) * (t >= i)
    gam = torch.cumprod(a, 0)
    prev = torch.cat([one.reshape(1), gam[:-1]])                              # Π_{j<t} a_j
    # Π_{i<j<t} a_j: the factor a_{t'-1} enters at rows t' > i + 1
    a_prev = torch.cat([one.reshape(1), a[:-1]])
    Rp = torch.cumprod(torch.where(t > i + 1, a_prev.unsqueeze(1).expand(L, L), one), 0)
    b = a if decay_first else torch.ones_like(a)
    rho = (b.unsqueeze(1) * Rp) * (t > i)
    return R, rho, gam, b * prev


def chunk_delta_stored(k: Tensor, v: Tensor, q: Tensor, alpha: Tensor, theta: Tensor, S: Tensor, C: int,
                       decay_first: bool) -> Tuple[Tensor, Tensor]:
    """k, q [T, d_k], v [T, d_v], alpha, theta [T], S [d_v, d_k] -> y [T, d_v], final S (see the module doc)."""
    store = rules.store
    k, q = store(k), store(q)
    ys = []
    for c0 in range(0, k.shape[0], C):
        kc, vc, qc = k[c0:c0 + C], v[c0:c0 + C], q[c0:c0 + C]
        beta = theta[c0:c0 + C]
        L = kc.shape[0]
        R, rho, gam, c = _decays(1 - alpha[c0:c0 + C], decay_first)
        eye = torch.eye(L, dtype=k.dtype)
        lower = beta.unsqueeze(1) * rho * (kc @ kc.T)                         # strictly lower
        inv = store(torch.linalg.solve_triangular(eye + lower, eye, upper=False, unitriangular=True))
        w = store(inv @ store((beta * c).unsqueeze(1) * kc))
        u = store(inv @ store(beta.unsqueeze(1) * vc))
        h = store(S)                                                          # the chunk state as the products read it
        v_new = store(u - w @ h.T)
        qk = store(R * (qc @ kc.T))                                           # R is zero above the diagonal
        ys.append(store(gam.unsqueeze(1) * (qc @ h.T) + qk @ v_new))
        S = gam[-1] * S + (v_new * R[-1].unsqueeze(1)).T @ kc                 # the hand-off, in f32
    if not ys:
        return q.new_zeros(0, v.shape[1]), S
    return torch.cat(ys), S


def run_chunked(key: str, k: Tensor, v: Tensor, q: Tensor, gates: Dict[str, Tensor], st: Dict[str, Tensor],
                C: int) -> Tuple[Tensor, Dict[str, Tensor]]:
    """INNER's signature for the rules of CHUNKED_RULES, in chunks of C tokens."""
    y, S = chunk_delta_stored(k, v, q, gates["alpha"], gates["theta"], st["M"], C, CHUNKED_RULES[key])
    return y, {"M": S}
