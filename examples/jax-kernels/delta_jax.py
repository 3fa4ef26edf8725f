"""A delta-rule kernel in JAX (`jax.lax.scan` over the tokens), for `--backend jax:` (docs/kernels.md#jax).

The conventions of examples/py-kernels/naive_delta.py: inputs [B, T, H, d], gates per (token, head)
[B, T, H] (`forget` is our alpha, `beta` our theta), the state stored as [B, H, d_k, d_v]
(transposed), `initial_state` / `output_final_state` keywords and a `scale` keyword on q:

    S_t = (1 - forget_t) S_{t-1} - beta_t k_t (k_t^T S_{t-1} - v_t^T),    o_t = S_t^T (scale q_t)

Its backward is `jax.vjp` of this function. The declaration is the `py:` kind's `nlc` dict.

Run:  NLC_TORCH_PYTHON=<a Python with torch and jax> npm run conformance -- --backend jax:examples/jax-kernels/delta_jax.py:delta_jax
"""
import jax
import jax.numpy as jnp


def delta_jax(q, k, v, forget, beta, scale=None, initial_state=None, output_final_state=False):
    B, T, H, dk = k.shape
    dv = v.shape[-1]
    scale = dk ** -0.5 if scale is None else scale
    S0 = jnp.zeros((B, H, dk, dv), q.dtype) if initial_state is None else initial_state

    def step(S, x):
        qt, kt, vt, a, b = x                                       # [B, H, d], gates [B, H]
        err = jnp.einsum("bhk,bhkv->bhv", kt, S) - vt              # k^T S - v^T
        S = (1 - a[..., None, None]) * S - b[..., None, None] * jnp.einsum("bhk,bhv->bhkv", kt, err)
        return S, jnp.einsum("bhk,bhkv->bhv", qt * scale, S)

    tokens = tuple(jnp.moveaxis(x, 1, 0) for x in (q, k, v, forget, beta))  # scanned over T
    S, o = jax.lax.scan(step, S0, tokens)
    return jnp.moveaxis(o, 0, 1), (S if output_final_state else None)


delta_jax.nlc = {
    "rules": ["delta"], "dtype": "f32", "layout": "BTHD", "state_layout": "transposed",
    "names": {"alpha": "forget", "theta": "beta"},
    "initial_state": "initial_state", "output_final_state": "output_final_state", "scale": "scale",
}
