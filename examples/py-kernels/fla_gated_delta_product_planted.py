"""fla's Gated DeltaProduct kernels (fla_gated_delta_product.py) with one Householder step dropped:
the last step of every token gets beta = 0, so the state skips it (its key, value and step still
arrive). Declared as the clean kernels; each must fail, forward and backward
(tests/fla-delta-product.test.ts).
"""
import functools

from fla_gated_delta_product import CHUNK, NAIVE, _chunk_gated_delta_product, _naive_recurrent_gated_delta_product

from fla_deltanet import declared


def _drop_last_step(beta, n):
    """beta [B, T·n, H] with each token's last step (row t·n + n − 1) zeroed."""
    keep = beta.new_ones(n)
    keep[n - 1] = 0
    return beta * keep.repeat(beta.shape[1] // n)[None, :, None]


# each keeps the signature of the fla function it calls (functools.wraps), as the clean kernel declares it


@functools.wraps(_chunk_gated_delta_product)
def _chunk_step_dropped(q, k, v, g, beta, num_householder, **kw):
    return _chunk_gated_delta_product(q, k, v, g, _drop_last_step(beta, num_householder), num_householder, **kw)


@functools.wraps(_naive_recurrent_gated_delta_product)
def _naive_step_dropped(q, k, v, g, beta, scale, cu_seqlens, num_householder=1, **kw):
    return _naive_recurrent_gated_delta_product(q, k, v, g, _drop_last_step(beta, num_householder), scale, cu_seqlens,
                                                num_householder=num_householder, **kw)


chunk_step_dropped = declared(_chunk_step_dropped, **CHUNK)
naive_step_dropped = declared(_naive_step_dropped, **NAIVE)
