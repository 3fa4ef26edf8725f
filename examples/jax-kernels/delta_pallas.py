"""A delta-rule kernel in Pallas (`pallas_call(..., interpret=True)`: it runs on a CPU), for
`--backend jax:` (docs/kernels.md#jax). One program per (sequence, head) walks the tokens with
the state in registers, in the conventions of delta_jax.py (and examples/py-kernels/naive_delta.py):

    S_t = (1 - forget_t) S_{t-1} - beta_t k_t (k_t^T S_{t-1} - v_t^T),    o_t = S_t^T (scale q_t)

Its backward is a second Pallas kernel (the adjoint walk, `_backward_kernel`), tied to the forward by
`jax.custom_vjp`; `jax.vjp` of the whole function reaches it.

Run:  NLC_TORCH_PYTHON=<a Python with torch and jax> npm run conformance -- --backend jax:examples/jax-kernels/delta_pallas.py:delta_pallas
"""
import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl


def _kernel(q_ref, k_ref, v_ref, a_ref, b_ref, s0_ref, o_ref, s_ref, *, scale):
    T = q_ref.shape[0]

    def step(t, S):                                   # one token: S [d_k, d_v]
        kt, vt = k_ref[t, :], v_ref[t, :]
        err = kt @ S - vt                             # k^T S - v^T
        S = (1 - a_ref[t]) * S - b_ref[t] * (kt[:, None] * err[None, :])
        o_ref[t, :] = (q_ref[t, :] * scale) @ S
        return S

    s_ref[...] = jax.lax.fori_loop(0, T, step, s0_ref[...])


def _backward_kernel(q_ref, k_ref, v_ref, a_ref, b_ref, s0_ref, do_ref, dsT_ref,
                     dq_ref, dk_ref, dv_ref, da_ref, db_ref, ds0_ref, states_ref, *, scale):
    """The adjoint walk of one (sequence, head): the states recomputed forward into `states_ref`
    (S_0 .. S_T), then, token by token backward, with dS the gradient of S_t:
    dS += scale q_t do_t^T; dq_t = scale S_t do_t; e = S_{t-1}^T k_t - v_t; d(forget_t) = -<S_{t-1}, dS>;
    d(beta_t) = -k_t^T dS e; dv_t = beta_t dS^T k_t; dk_t = -beta_t (dS e + S_{t-1} dS^T k_t);
    dS <- (1 - forget_t) dS - beta_t k_t (dS^T k_t)^T."""
    T = q_ref.shape[0]
    states_ref[0] = s0_ref[...]

    def forward(t, S):
        kt = k_ref[t, :]
        S = (1 - a_ref[t]) * S - b_ref[t] * (kt[:, None] * (kt @ S - v_ref[t, :])[None, :])
        states_ref[t + 1] = S
        return S

    jax.lax.fori_loop(0, T, forward, s0_ref[...])

    def backward(i, dS):
        t = T - 1 - i
        S, S_prev = states_ref[t + 1], states_ref[t]
        kt, vt, qt, dot, a, b = k_ref[t, :], v_ref[t, :], q_ref[t, :] * scale, do_ref[t, :], a_ref[t], b_ref[t]
        dS = dS + qt[:, None] * dot[None, :]
        dq_ref[t, :] = scale * (S @ dot)
        e = kt @ S_prev - vt
        u, w = dS @ e, kt @ dS
        da_ref[t] = -jnp.sum(S_prev * dS)
        db_ref[t] = -jnp.sum(kt * u)
        dv_ref[t, :] = b * w
        dk_ref[t, :] = -b * (u + S_prev @ w)
        return (1 - a) * dS - b * (kt[:, None] * w[None, :])

    ds0_ref[...] = jax.lax.fori_loop(0, T, backward, dsT_ref[...])


def _specs(T, dk, dv):
    tok = lambda d: pl.BlockSpec((None, None, T, d), lambda b, h: (b, h, 0, 0))
    gate = pl.BlockSpec((None, None, T), lambda b, h: (b, h, 0))
    state = pl.BlockSpec((None, None, dk, dv), lambda b, h: (b, h, 0, 0))
    return tok, gate, state


@functools.partial(jax.custom_vjp, nondiff_argnums=(6,))
def _delta(q, k, v, a, b, S0, scale):
    """[B, H, T, d] tokens, [B, H, T] gates, [B, H, d_k, d_v] state -> (o, S_T)."""
    B, H, T, dk = k.shape
    dv = v.shape[-1]
    tok, gate, state = _specs(T, dk, dv)
    return tuple(pl.pallas_call(
        functools.partial(_kernel, scale=scale), grid=(B, H),
        in_specs=[tok(dk), tok(dk), tok(dv), gate, gate, state], out_specs=[tok(dv), state],
        out_shape=[jax.ShapeDtypeStruct((B, H, T, dv), q.dtype), jax.ShapeDtypeStruct((B, H, dk, dv), q.dtype)],
        interpret=True,
    )(q, k, v, a, b, S0))


def _delta_fwd(q, k, v, a, b, S0, scale):
    return _delta(q, k, v, a, b, S0, scale), (q, k, v, a, b, S0)


def _delta_bwd(scale, res, cot):
    q, k, v, a, b, S0 = res
    do, dST = cot
    B, H, T, dk = k.shape
    dv = v.shape[-1]
    tok, gate, state = _specs(T, dk, dv)
    shape = lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype)
    grads = pl.pallas_call(
        functools.partial(_backward_kernel, scale=scale), grid=(B, H),
        in_specs=[tok(dk), tok(dk), tok(dv), gate, gate, state, tok(dv), state],
        out_specs=[tok(dk), tok(dk), tok(dv), gate, gate, state,
                   pl.BlockSpec((None, None, T + 1, dk, dv), lambda b, h: (b, h, 0, 0, 0))],
        out_shape=[shape(q), shape(k), shape(v), shape(a), shape(b), shape(S0),
                   jax.ShapeDtypeStruct((B, H, T + 1, dk, dv), S0.dtype)],  # the recomputed states
        interpret=True,
    )(q, k, v, a, b, S0, do, dST)
    return tuple(grads[:6])


_delta.defvjp(_delta_fwd, _delta_bwd)


def delta_pallas(q, k, v, forget, beta, scale=None, initial_state=None, output_final_state=False):
    B, T, H, dk = k.shape
    dv = v.shape[-1]
    scale = dk ** -0.5 if scale is None else scale
    S0 = jnp.zeros((B, H, dk, dv), q.dtype) if initial_state is None else initial_state
    if T == 0:  # no token: the state unchanged
        return jnp.zeros((B, 0, H, dv), q.dtype), (S0 if output_final_state else None)
    heads = lambda x: jnp.moveaxis(x, 2, 1)                       # [B, T, H, ...] <-> [B, H, T, ...]
    o, S = _delta(heads(q), heads(k), heads(v), heads(forget), heads(beta), S0, float(scale))
    return heads(o), (S if output_final_state else None)


delta_pallas.nlc = {
    "rules": ["delta"], "dtype": "f32", "layout": "BTHD", "state_layout": "transposed",
    "names": {"alpha": "forget", "theta": "beta"},
    "initial_state": "initial_state", "output_final_state": "output_final_state", "scale": "scale",
}
