"""fla's GDN2, gated Oja and TTT-Linear kernels (fla_gdn2_oja.py, fla_ttt.py) with one bug planted in
each by changing what the kernel receives; each must fail, naming the tensor
(tests/fla-gdn2-oja-ttt.test.ts):

* GDN2: the per-key-channel decay applied to reversed channels (g flipped along K).
* Gated Oja: the per-value-channel decay applied one token late (gv shifted by one token).
* TTT-Linear: the mini-batch hand-off one token off (chunk size 2 where the rule, and the
  declaration, take the gradient at every token), and the LayerNorm's γ left out of the backward
  (`ln_w` detached: the forward is fla's, every term of dγ is dropped).
"""
import functools

import torch

from fla_deltanet import declared
from fla_gdn2_oja import (FLA_CHUNK, GATED_OJA, GDN2, _chunk_gated_oja_rule, _chunk_gdn2, _fused_recurrent_gated_oja_rule,
                          _fused_recurrent_gdn2)
from fla_ttt import RULE_CHUNK, TTT, _chunk_ttt_linear, _fused_chunk_ttt_linear, ttt_per_head


@functools.wraps(_fused_recurrent_gdn2)
def _gdn2_reversed_channels(q, k, v, g, b, w, **kw):
    return _fused_recurrent_gdn2(q, k, v, g.flip(-1), b, w, **kw)


@functools.wraps(_chunk_gdn2)
def _chunk_gdn2_reversed_channels(q, k, v, g, b, w, **kw):
    return _chunk_gdn2(q, k, v, g.flip(-1), b, w, **kw)


def _late(gv):
    """gv one token late: token t decays with token t − 1's gate (token 0 with none)."""
    return torch.cat([torch.zeros_like(gv[:, :1]), gv[:, :-1]], dim=1)


@functools.wraps(_fused_recurrent_gated_oja_rule)
def _oja_late_decay(q, k, v, gv=None, beta=None, **kw):
    return _fused_recurrent_gated_oja_rule(q, k, v, _late(gv), beta, **kw)


@functools.wraps(_chunk_gated_oja_rule)
def _chunk_oja_late_decay(q, k, v, gv, beta, **kw):
    return _chunk_gated_oja_rule(q, k, v, _late(gv), beta, **kw)


gdn2_reversed_channels = declared(_gdn2_reversed_channels, **GDN2, forward_only=True, head_dims="pow2")
chunk_gdn2_reversed_channels = declared(_chunk_gdn2_reversed_channels, **GDN2, chunk_size=FLA_CHUNK)
oja_late_decay = declared(_oja_late_decay, **GATED_OJA, forward_only=True)
chunk_oja_late_decay = declared(_chunk_oja_late_decay, **GATED_OJA, chunk_size=FLA_CHUNK)


def _ln_w_detached(op):
    @functools.wraps(op)
    def call(w, **kw):
        return op(w=w.detach(), **kw)
    return call


# chunk size 2 declared as the rule's 1: the gradient of every second token taken at the state before its predecessor's write
fused_chunk_ttt_linear_stale = declared(ttt_per_head(_fused_chunk_ttt_linear, 2), **TTT, chunk_size=RULE_CHUNK)
chunk_ttt_linear_ln_w_detached = declared(ttt_per_head(_ln_w_detached(_chunk_ttt_linear), RULE_CHUNK), **TTT, chunk_size=RULE_CHUNK)
