"""delta_jax.py with a planted bug, to show the `jax:` kind catches it by name (tests/jax-kind.test.ts):
its backward scales the gradient of k by 1.003 (`jax.custom_vjp` over the correct VJP); the forward
is untouched, so C5/jax-delta_jax_dk_scaled/delta/forward passes and .../backward fails naming dk.
"""
import jax

from delta_jax import delta_jax


@jax.custom_vjp
def _planted(q, k, v, forget, beta, scale, initial_state):
    return delta_jax(q, k, v, forget, beta, scale, initial_state, output_final_state=True)


def _fwd(q, k, v, forget, beta, scale, initial_state):
    out, vjp = jax.vjp(lambda *a: delta_jax(*a, output_final_state=True), q, k, v, forget, beta, scale, initial_state)
    return out, vjp


def _bwd(vjp, cot):
    dq, dk, dv, da, db, dscale, dS0 = vjp(cot)
    return dq, dk * 1.003, dv, da, db, dscale, dS0   # the planted bug


_planted.defvjp(_fwd, _bwd)


def delta_jax_dk_scaled(q, k, v, forget, beta, scale=None, initial_state=None, output_final_state=False):
    scale = k.shape[-1] ** -0.5 if scale is None else scale
    o, S = _planted(q, k, v, forget, beta, scale, initial_state)
    return o, (S if output_final_state else None)


delta_jax_dk_scaled.nlc = dict(delta_jax.nlc)
