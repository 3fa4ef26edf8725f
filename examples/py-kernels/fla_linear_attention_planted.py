"""fla's linear-attention kernels (fla_linear_attention.py) with one bug planted in each op, by changing
what the kernel receives, in the recurrent kernels and in the chunked ones; each must fail, naming the
tensor it gets wrong (tests/fla-linear-attention.test.ts):

* simple GLA: each token's decay applied one token late (g shifted by one token along T, the first
  token undecayed).
* GLA: the per-channel decays applied to reversed key channels (g flipped along K).
* linear attention: the initial state read transposed ([K, V] taken as [V, K]: a layout slip; K = V
  in every case, so the shapes agree).
* simple GLA with one decay per head (g_gamma): each head decayed by another head's (g_gamma reversed
  over the heads).
* RWKV-6: the bonus u applied to reversed key channels (u flipped along K).
"""
import functools

import torch

from fla_linear_attention import (FLA_CHUNK, GLA, LINEAR_ATTN, RWKV6, SIMPLE_GLA, SIMPLE_GLA_GAMMA, _chunk_gla, _chunk_linear_attn,
                                  _chunk_rwkv6, _chunk_simple_gla, _fused_recurrent_gla, _fused_recurrent_linear_attn,
                                  _fused_recurrent_rwkv6, _fused_recurrent_simple_gla)

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


# the per-head inputs (`per_head`): another head's decay, the bonus on reversed channels


@functools.wraps(_fused_recurrent_simple_gla)
def _simple_gla_gamma_other_head(q, k, v, g=None, g_gamma=None, **kw):
    return _fused_recurrent_simple_gla(q, k, v, g_gamma=g_gamma.flip(0), **kw)


@functools.wraps(_chunk_simple_gla)
def _chunk_simple_gla_gamma_other_head(q, k, v, g=None, g_gamma=None, **kw):
    return _chunk_simple_gla(q, k, v, g_gamma=g_gamma.flip(0), **kw)


@functools.wraps(_fused_recurrent_rwkv6)
def _rwkv6_bonus_reversed(r, k, v, w, u, **kw):
    return _fused_recurrent_rwkv6(r, k, v, w, u.flip(-1), **kw)


@functools.wraps(_chunk_rwkv6)
def _chunk_rwkv6_bonus_reversed(r, k, v, w, u, **kw):
    return _chunk_rwkv6(r, k, v, w, u.flip(-1), **kw)


simple_gla_gamma_other_head = declared(_simple_gla_gamma_other_head, **SIMPLE_GLA_GAMMA)
chunk_simple_gla_gamma_other_head = declared(_chunk_simple_gla_gamma_other_head, **SIMPLE_GLA_GAMMA, chunk_size=FLA_CHUNK)
rwkv6_bonus_reversed = declared(_rwkv6_bonus_reversed, **RWKV6)
chunk_rwkv6_bonus_reversed = declared(_chunk_rwkv6_bonus_reversed, **RWKV6, chunk_size=FLA_CHUNK)
