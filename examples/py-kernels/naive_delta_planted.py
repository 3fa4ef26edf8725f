"""Planted wrong variants of naive_delta.py (they must FAIL the `py:` checks):

* `no_initial_decay`: the first step forgets to decay the initial state (S_0 enters undamped);
  only cases that start from a non-zero state and a large forget gate show it.
* `dq_scaled`: a correct forward with an explicit backward whose query gradient is 1% too large.
* `dstate0_scaled`: the same with the initial state's gradient 1% too large.
* `ignores_d_final`: an explicit backward that drops the d(final state) term.
* `bf16_dtheta_scaled`: naive_delta_bf16.py with the step-size gate's gradient (dbeta, our dtheta)
  1% too large, through an autograd.Function on the f32 copy of beta; the gradient is rounded to
  bf16 once, as the correct kernel's is. The forward is correct.
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from naive_delta import naive_delta  # noqa: E402


def no_initial_decay(q, k, v, forget, beta, scale=None, initial_state=None, output_final_state=False):
    B, T, H, dk = k.shape
    scale = dk ** -0.5 if scale is None else scale
    S = initial_state
    outs = []
    for t in range(T):
        kt, vt, qt = k[:, t], v[:, t], q[:, t] * scale
        a, b = forget[:, t, :, None, None], beta[:, t, :, None, None]
        err = torch.einsum("bhk,bhkv->bhv", kt, S) - vt
        decay = 1 if t == 0 else (1 - a)                           # planted: no decay at t = 0
        S = decay * S - b * torch.einsum("bhk,bhv->bhkv", kt, err)
        outs.append(torch.einsum("bhk,bhkv->bhv", qt, S))
    return torch.stack(outs, dim=1), S


no_initial_decay.nlc = dict(naive_delta.nlc)


class ExplicitBackward:
    """Forward = naive_delta; an explicit backward (autograd inside) with one planted defect."""
    nlc = dict(naive_delta.nlc)
    dq_factor, ds0_factor, use_d_final = 1.0, 1.0, True

    def __call__(self, q, k, v, forget, beta, scale=None, initial_state=None, output_final_state=False):
        return naive_delta(q, k, v, forget, beta, scale, initial_state, output_final_state)

    def backward(self, q, k, v, forget, beta, initial_state, dy, d_final_state, scale=None):
        leaves = [t.detach().clone().requires_grad_(True) for t in (q, k, v, forget, beta, initial_state)]
        with torch.enable_grad():
            o, S = naive_delta(*leaves[:5], scale=scale, initial_state=leaves[5], output_final_state=True)
            loss = (o * dy).sum()
            if d_final_state is not None and self.use_d_final:
                loss = loss + (S * d_final_state).sum()
            g = torch.autograd.grad(loss, leaves)
        return {"q": g[0] * self.dq_factor, "k": g[1], "v": g[2], "forget": g[3], "beta": g[4],
                "initial_state": g[5] * self.ds0_factor}


class DqScaled(ExplicitBackward):
    dq_factor = 1.01


class DState0Scaled(ExplicitBackward):
    ds0_factor = 1.01


class IgnoresDFinal(ExplicitBackward):
    use_d_final = False


class ExplicitCorrect(ExplicitBackward):
    """No defect: the explicit-backward path itself passes."""


dq_scaled = DqScaled
dstate0_scaled = DState0Scaled
ignores_d_final = IgnoresDFinal
explicit_correct = ExplicitCorrect


class _ScaledGrad(torch.autograd.Function):
    """Identity forward; the backward scales the incoming gradient."""

    @staticmethod
    def forward(ctx, x, factor):
        ctx.factor = factor
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return g * ctx.factor, None


def bf16_dtheta_scaled(q, k, v, forget, beta, scale=None, initial_state=None, output_final_state=False):
    beta32 = _ScaledGrad.apply(beta.float(), 1.01)                 # planted: dbeta * 1.01
    o, S = naive_delta(q.float(), k.float(), v.float(), forget.float(), beta32, scale=scale,
                       initial_state=initial_state.float(), output_final_state=output_final_state)
    return o.to(torch.bfloat16), S


bf16_dtheta_scaled.nlc = {**naive_delta.nlc, "dtype": "bf16", "state_dtype": "f32"}
