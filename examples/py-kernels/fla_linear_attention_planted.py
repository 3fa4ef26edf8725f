"""fla's linear-attention kernels (fla_linear_attention.py) with one bug planted in each op, by changing
what the kernel receives, in the recurrent kernels and in the chunked ones; each must fail, naming the
tensor it gets wrong (tests/fla-linear-attention.test.ts):

* simple GLA: each token's decay applied one token late (g shifted by one token along T, the first
  token undecayed).
* GLA: the per-channel decays applied to reversed key channels (g flipped along K).
* linear attention: the initial state read transposed ([K, V] taken as [V, K]: a layout slip; K = V
  in every case, so the shapes agree).
"""
import functools

import torch

from fla_linear_attention import (FLA_CHUNK, GLA, LINEAR_ATTN, SIMPLE_GLA, _chunk_gla, _chunk_linear_attn, _chunk_simple_gla,
                                  _fused_recurrent_gla, _fused_recurrent_linear_attn, _fused_recurrent_simple_gla)

from nlc_torch import declared


def _late(g):
    """g one token late: token t decays by token t − 1's gate, token 0 not at all."""
    return torch.cat([torch.zeros_like(g[:, :1]), g[:, :-1]], dim=1)


def _transposed(state):
    return None if state is None else state.transpose(-1, -2).contiguous()


# each keeps the signature of the fla function it calls (functools.wraps), as the clean kernel declares it


@functools.wraps(_fused_recurrent_simple_gla)
def _simple_gla_decay_late(q, k, v, g=None, **kw):
    return _fused_recurrent_simple_gla(q, k, v, _late(g), **kw)


@functools.wraps(_fused_recurrent_gla)
def _gla_reversed_channels(q, k, v, gk=None, **kw):
    return _fused_recurrent_gla(q, k, v, gk.flip(-1), **kw)


@functools.wraps(_fused_recurrent_linear_attn)
def _linear_attn_state_transposed(q, k, v, initial_state=None, **kw):
    return _fused_recurrent_linear_attn(q, k, v, initial_state=_transposed(initial_state), **kw)


simple_gla_decay_late = declared(_simple_gla_decay_late, **SIMPLE_GLA)
gla_reversed_channels = declared(_gla_reversed_channels, **{**GLA, "log_gates": {"alpha": "gk"}})
linear_attn_state_transposed = declared(_linear_attn_state_transposed, **LINEAR_ATTN, constants={"normalize": False})


# the same bugs planted in fla's chunked kernels (with their backward: judged both ways)


@functools.wraps(_chunk_simple_gla)
def _chunk_simple_gla_decay_late(q, k, v, g=None, **kw):
    return _chunk_simple_gla(q, k, v, _late(g), **kw)


@functools.wraps(_chunk_gla)
def _chunk_gla_reversed_channels(q, k, v, g, **kw):
    return _chunk_gla(q, k, v, g.flip(-1), **kw)


@functools.wraps(_chunk_linear_attn)
def _chunk_linear_attn_state_transposed(q, k, v, initial_state=None, **kw):
    return _chunk_linear_attn(q, k, v, initial_state=_transposed(initial_state), **kw)


chunk_simple_gla_decay_late = declared(_chunk_simple_gla_decay_late, **SIMPLE_GLA, chunk_size=FLA_CHUNK)
chunk_gla_reversed_channels = declared(_chunk_gla_reversed_channels, **GLA, chunk_size=FLA_CHUNK)
chunk_linear_attn_state_transposed = declared(_chunk_linear_attn_state_transposed, **LINEAR_ATTN, chunk_size=FLA_CHUNK,
                                              constants={"normalize": False})
