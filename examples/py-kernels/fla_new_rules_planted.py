"""fla's KDA, Comba and DPLR kernels (fla_new_rules.py) with one bug planted in each, by changing
what the kernel receives, in the recurrent kernels and in the chunked ones; each must fail
(tests/fla-new-rules.test.ts):

* KDA: the per-channel decays applied to reversed channels (g flipped along K).
* Comba: the correction reads the state with k instead of p.
* DPLR: the low-rank read b (a^T S) taken from the decayed state: a^T diag(exp gk) S = (a * exp gk)^T S.
"""
import functools

from fla_new_rules import (COMBA, DPLR, FLA_CHUNK, KDA, _chunk_comba, _chunk_dplr, _chunk_kda, _fused_recurrent_comba,
                           _fused_recurrent_dplr, _fused_recurrent_kda)

from fla_deltanet import declared


# each keeps the signature of the fla function it calls (functools.wraps), as the clean kernel declares it


@functools.wraps(_fused_recurrent_kda)
def _kda_reversed_channels(q, k, v, g, beta, **kw):
    return _fused_recurrent_kda(q, k, v, g.flip(-1), beta, **kw)


@functools.wraps(_fused_recurrent_comba)
def _comba_reads_k(q, k, p, v, g, beta, **kw):
    return _fused_recurrent_comba(q, k, k, v, g, beta, **kw)


@functools.wraps(_fused_recurrent_dplr)
def _dplr_decayed_read(q, k, v, a, b, gk, **kw):
    return _fused_recurrent_dplr(q, k, v, a * gk.exp(), b, gk, **kw)


kda_reversed_channels = declared(_kda_reversed_channels, **KDA, forward_only=True, head_dims="pow2")
comba_reads_k = declared(_comba_reads_k, **COMBA, forward_only=True)
dplr_decayed_read = declared(_dplr_decayed_read, **DPLR, forward_only=True)


# the same three bugs planted in fla's chunked kernels (with their backward: judged both ways)


@functools.wraps(_chunk_kda)
def _chunk_kda_reversed_channels(q, k, v, g, beta, **kw):
    return _chunk_kda(q, k, v, g.flip(-1), beta, **kw)


@functools.wraps(_chunk_comba)
def _chunk_comba_reads_k(q, k, v, p, g, beta=None, **kw):
    return _chunk_comba(q, k, v, k, g, beta, **kw)


@functools.wraps(_chunk_dplr)
def _chunk_dplr_decayed_read(q, k, v, a, b, gk, **kw):
    return _chunk_dplr(q, k, v, a * gk.exp(), b, gk, **kw)


chunk_kda_reversed_channels = declared(_chunk_kda_reversed_channels, **KDA, chunk_size=FLA_CHUNK)
chunk_comba_reads_k = declared(_chunk_comba_reads_k, **COMBA, chunk_size=FLA_CHUNK)
chunk_dplr_decayed_read = declared(_chunk_dplr_decayed_read, **DPLR, chunk_size=FLA_CHUNK, constants={"chunk_size": FLA_CHUNK})
