"""delta_pallas.py with a planted bug, to show the `jax:` kind catches it by name
(tests/jax-kind.test.ts): each token is updated with the previous token's beta (the first with the
last's), so C5/jax-delta_pallas_beta_shifted/delta/forward fails on y and the final state.
"""
import jax.numpy as jnp

from delta_pallas import delta_pallas


def delta_pallas_beta_shifted(q, k, v, forget, beta, scale=None, initial_state=None, output_final_state=False):
    return delta_pallas(q, k, v, forget, jnp.roll(beta, 1, axis=1), scale, initial_state, output_final_state)  # the planted bug


delta_pallas_beta_shifted.nlc = dict(delta_pallas.nlc)
