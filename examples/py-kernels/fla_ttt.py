"""flash-linear-attention's TTT-Linear and Titans-linear ops (fla-core 0.5.2) for the rules
`ttt_linear` and `titans_linear` (docs/spec/ttt.md; docs/spec/py-backend.md#fla-ttt):

    NLC_TORCH_PYTHON=/path/to/venv/bin/python npx nlc --backend py:examples/py-kernels/fla_ttt.py:chunk_ttt_linear --rule ttt_linear

Not a declaration alone: fla takes the LayerNorm's γ, β (`w`, `b`) once per head, `[H, d]`, where
the rules carry them in the state, one vector per sequence and head (decisions.md#ttt-ln-state), and
it takes the state's parts under separate keywords. So each op is called through `ttt_per_head`
or `titans_per_head`, which move data (docs/spec/decisions.md#fla-ttt-adaptor): the B sequences become B·H heads of one sequence (each
(sequence, head) its own γ, β), the state dict becomes fla's keywords (h = Mᵀ, `[N, H, K, V]`; the
bias state `[N, H, 1, V]`), θ gets fla's trailing axis `[B, T, H, 1]`, and γ, β come back unchanged
as the final state's `ln_w`, `ln_b`. ε is the rule's hyperparameter (`config`).

* TTT-Linear (`ttt_linear`): fla's `chunk_ttt_linear` and `fused_chunk_ttt_linear` (Triton) take
  every gradient of a mini-batch at its first state (docs/spec/ttt.md#ttt-linear); the rule is the
  per-token form, C = 1 (decisions.md#ttt-per-token), so they are called with `chunk_size=1`.
  fla's default, 16, computes the mini-batch form, which the `py:` backend has no reference for
  (py-backend.md#fla-ttt). fla's PyTorch reference of the op, `chunk_ttt_linear_ref`, scales its
  caller's f32 q in place (repros/fla/ttt_ref_scales_q_in_place.py): it fails as shipped.
* Titans-linear (`titans_linear`): fla ships it as PyTorch (`fla.ops.titans.naive`), `[B, H, T, d]`,
  with the gates `[B, H, T, 1]`; `chunk_titans_linear` (its chunked form) and `titans_linear` (per
  token), each at chunk size 1, the rule's. fla starts the momentum S from 0 and returns only M; the
  rule's state has S: the adaptor gets fla's M_{T−1} from a second call on the first T − 1 tokens
  and returns S_T = M_T − (1 − α_T) M_{T−1} (the rule's own update, solved for S). fla's
  inner step is not the gradient of its stated loss (repros/fla/titans_linear_inner_step.py): both
  fail as shipped.
"""

import fla_real  # noqa: F401  (Triton's interpreter without a GPU)
import torch

from fla.ops.titans.naive import chunk_titans_linear as _chunk_titans_linear
from fla.ops.titans.naive import titans_linear as _titans_linear
from fla.ops.ttt import chunk_ttt_linear as _chunk_ttt_linear
from fla.ops.ttt import fused_chunk_ttt_linear as _fused_chunk_ttt_linear
from fla.ops.ttt.naive import chunk_ttt_linear_ref as _chunk_ttt_linear_ref

from fla_deltanet import declared


def fold(t):
    """[B, T, H, ...] -> [1, T, B·H, ...]: every (sequence, head) a head of one sequence."""
    B, T, H = t.shape[:3]
    return t.transpose(0, 1).reshape(T, B * H, *t.shape[3:]).unsqueeze(0)


def unfold(t, B, H):
    """The inverse of fold."""
    T = t.shape[1]
    return t.squeeze(0).reshape(T, B, H, *t.shape[3:]).transpose(0, 1)


def named(fn, op):
    """fn under the name of the fla op it calls (its own signature kept: not functools.wraps)."""
    fn.__name__ = fn.__qualname__ = op.__name__
    return fn


def ttt_per_head(op, chunk_size, chunk_keyword="chunk_size"):
    """fla's TTT-Linear op `op` in the rule's calling convention (BTHD, state a dict, ours); the
    op takes its mini-batch size under `chunk_keyword`."""
    def ttt_linear(q, k, v, theta, initial_state, config, scale=None):
        B, T, H, d = q.shape
        st = initial_state
        o, h, hb = op(q=fold(q), k=fold(k), v=fold(v), w=st["ln_w"].reshape(B * H, d), b=st["ln_b"].reshape(B * H, d),
                      eta=fold(theta).unsqueeze(-1), scale=scale, eps=config["eps"], **{chunk_keyword: chunk_size},
                      initial_state=st["M"].transpose(-1, -2).reshape(1, B * H, d, d),
                      initial_state_bias=st["M_b"].reshape(1, B * H, 1, d), output_final_state=True)
        return unfold(o, B, H), {"M": h.reshape(B, H, d, d).transpose(-1, -2), "M_b": hb.reshape(B, H, d),
                                 "ln_w": st["ln_w"].clone(), "ln_b": st["ln_b"].clone()}
    return named(ttt_linear, op)


def titans_per_head(op, chunk_size):
    """fla's Titans-linear op `op` in the rule's calling convention (BHTD, state a dict, ours)."""
    def titans_linear(q, k, v, alpha, theta, eta, initial_state, config):
        B, H, T, d = q.shape
        st = initial_state
        w, b = st["ln_w"].reshape(B * H, d), st["ln_b"].reshape(B * H, d)
        hf = lambda t: t.reshape(1, B * H, *t.shape[2:])  # noqa: E731  [B, H, ...] -> [1, B·H, ...]
        gates = [hf(g).unsqueeze(-1) for g in (theta, alpha, eta)]
        M0 = hf(st["M"].transpose(-1, -2))

        def run(n):
            return op(hf(q)[:, :, :n], hf(k)[:, :, :n], hf(v)[:, :, :n], w, b, *[g[:, :, :n] for g in gates], config["eps"],
                      chunk_size, M0, True)
        o, hT = run(T)
        hP = run(T - 1)[1] if T > 1 else M0
        MT, MP = hT.reshape(B, H, d, d).transpose(-1, -2), hP.reshape(B, H, d, d).transpose(-1, -2)
        ST = MT - (1 - alpha[:, :, T - 1, None, None]) * MP
        return o.reshape(B, H, T, d), {"M": MT, "S": ST, "ln_w": st["ln_w"].clone(), "ln_b": st["ln_b"].clone()}
    return named(titans_linear, op)


TTT = {"rules": ["ttt_linear"], "scale": {"keyword": "scale", "value": "rsqrt_dk"},
       "outputs": {"y": "o", "M": "final_state", "M_b": "final_state_bias"}, "accumulate": "f32"}
TITANS = {"rules": ["titans_linear"], "layout": "BHTD", "outputs": {"y": "o", "M": "final_state"}, "accumulate": "f32"}

# the rule's chunk size: one token (decisions.md#ttt-per-token)
RULE_CHUNK = 1
chunk_ttt_linear = declared(ttt_per_head(_chunk_ttt_linear, RULE_CHUNK), **TTT, chunk_size=RULE_CHUNK)
fused_chunk_ttt_linear = declared(ttt_per_head(_fused_chunk_ttt_linear, RULE_CHUNK), **TTT, chunk_size=RULE_CHUNK)
# fla's PyTorch reference of the op (its mini-batch size keyword is `mini_batch_size`)
chunk_ttt_linear_ref = declared(ttt_per_head(_chunk_ttt_linear_ref, RULE_CHUNK, "mini_batch_size"), **TTT, chunk_size=RULE_CHUNK)
chunk_titans_linear = declared(titans_per_head(_chunk_titans_linear, RULE_CHUNK), **TITANS, chunk_size=RULE_CHUNK)
titans_linear = declared(titans_per_head(_titans_linear, RULE_CHUNK), **TITANS)
