"""Planted wrong variants of the fla-style adaptors (fla_deltanet.py); each must NOT pass:

* `gated_corrects_first`: Gated DeltaNet that corrects from the undecayed state and decays after
  (Titans' order, the reference's `delta`): S_t = a_t S_{t−1} + β_t k_t (v_t − S_{t−1}ᵀ k_t)ᵀ. Fails the forward.
* `chunk_gated_dbeta_scaled_bf16`: the bf16 chunked Gated DeltaNet with dβ × (1 + 1/128) (forward
  correct); fails the backward on dtheta.
* `chunk_gated_no_decay_in_w`: the chunked Gated DeltaNet with the decay left out of the WY factor W
  (a dropped term); fails the forward.
* `deltanet_ignores_alpha`: DeltaNet declared without `absent`, taking alpha through **kwargs and
  ignoring it: an error naming alpha (the host redraws each input and sees y unchanged).
* `deltanet_undeclared`: DeltaNet declared without `absent`: alpha is not in its signature, an
  error naming alpha.
* `deltanet_scale_undeclared`: DeltaNet that scales q by K^-1/2 while declaring no scale: fails.
"""
import torch

import fla_style_ops as ops
from fla_deltanet import DELTANET, GATED_DELTANET
from nlc_torch import declared


def _gated_corrects_first_step(q, k, v, g, beta, S):
    outs = []
    for t in range(k.shape[1]):
        kt, vt, qt, bt = k[:, t], v[:, t], q[:, t], beta[:, t, :, None]
        v_new = bt * (vt - torch.einsum("bhk,bhkv->bhv", kt, S))      # planted: error of the undecayed S
        S = S * g[:, t, :, None, None].exp() + torch.einsum("bhk,bhv->bhkv", kt, v_new)
        outs.append(torch.einsum("bhk,bhkv->bhv", qt, S))
    return torch.stack(outs, 1), S


def gated_corrects_first(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                         cu_seqlens=None, use_qk_l2norm_in_kernel=False):
    return ops._run(_gated_corrects_first_step, q, k, v, g, beta, scale, initial_state, output_final_state,
                    cu_seqlens, use_qk_l2norm_in_kernel)


gated_corrects_first.nlc = GATED_DELTANET


class _ScaledGrad(torch.autograd.Function):
    """Identity forward; the backward scales the incoming gradient."""

    @staticmethod
    def forward(ctx, x, factor):
        ctx.factor = factor
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.factor, None


def chunk_gated_dbeta_scaled_bf16(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                                  cu_seqlens=None, use_qk_l2norm_in_kernel=False):
    beta = _ScaledGrad.apply(beta.float(), 1 + 1 / 128).to(beta.dtype)   # planted: dbeta x (1 + 1/128)
    return ops.chunk_gated_delta_rule(q, k, v, g, beta, scale, initial_state, output_final_state, cu_seqlens,
                                      use_qk_l2norm_in_kernel)


chunk_gated_dbeta_scaled_bf16.nlc = {**GATED_DELTANET, "dtype": "bf16", "chunk_size": ops.CHUNK}


def _chunk_step_without_w_decay(q, k, v, g, beta, S, C=ops.CHUNK):
    B, T, H, K = k.shape
    (q, k, v, g, beta), n, lower, strict, eye = ops.chunked(q, k, v, g, beta, C)
    outs = []
    for i in range(n):
        qc, kc, vc, bc = q[:, i], k[:, i], v[:, i], beta[:, i]
        cum = g[:, i].cumsum(-1)
        R = (cum[..., :, None] - cum[..., None, :]).masked_fill(~lower, float("-inf")).exp()
        L = (bc[..., :, None] * R * (kc @ kc.transpose(-1, -2))).masked_fill(~strict, 0)
        A = eye + L
        U = torch.linalg.solve_triangular(A, bc[..., None] * vc, upper=False, unitriangular=True)
        W = torch.linalg.solve_triangular(A, bc[..., None] * kc, upper=False, unitriangular=True)  # planted: no exp(b)
        v_new = U - W @ S
        o = cum.exp()[..., None] * (qc @ S) + (R * (qc @ kc.transpose(-1, -2))).masked_fill(~lower, 0) @ v_new
        last = cum[..., -1:]
        S = last.exp()[..., None] * S + ((last - cum).exp()[..., None] * kc).transpose(-1, -2) @ v_new
        outs.append(o)
    o = torch.stack(outs, 1).transpose(2, 3).reshape(B, n * C, H, -1)
    return o[:, :T], S


def chunk_gated_no_decay_in_w(q, k, v, g, beta, scale=None, initial_state=None, output_final_state=False,
                              cu_seqlens=None, use_qk_l2norm_in_kernel=False):
    return ops._run(_chunk_step_without_w_decay, q, k, v, g, beta, scale, initial_state, output_final_state,
                    cu_seqlens, use_qk_l2norm_in_kernel)


chunk_gated_no_decay_in_w.nlc = {**GATED_DELTANET, "chunk_size": ops.CHUNK}


def deltanet_ignores_alpha(q, k, v, beta, scale=None, initial_state=None, output_final_state=False,
                           cu_seqlens=None, use_qk_l2norm_in_kernel=False, **kwargs):
    return ops.fused_recurrent_delta_rule(q, k, v, beta, scale, initial_state, output_final_state, cu_seqlens,
                                          use_qk_l2norm_in_kernel)


deltanet_ignores_alpha.nlc = {k: v for k, v in DELTANET.items() if k != "absent"}

deltanet_undeclared = declared(ops.fused_recurrent_delta_rule, **{k: v for k, v in DELTANET.items() if k != "absent"})

deltanet_scale_undeclared = declared(ops.fused_recurrent_delta_rule, **{k: v for k, v in DELTANET.items() if k != "scale"})
