"""fla-core 0.5.2, fla/ops/ttt/naive.py `chunk_ttt_linear_ref`: with T not a multiple of
mini_batch_size, the returned final bias state includes an update from the zero tokens it pads with.

T = 3, mini_batch_size = 2 against the same three tokens run as a mini-batch of 2 then one of 1
(the last mini-batch cut short at T). The outputs and the final matrix state agree exactly; the
final bias state does not: a padded token has k = 0 (so it leaves h alone) but its LayerNorm
gradient at z = h_b is not zero, and h_b takes it. Run: python repros/fla/ttt_padded_bias.py.
"""
import torch
from fla.ops.ttt.naive import chunk_ttt_linear_ref

torch.manual_seed(0)
B, T, H, D, dt = 1, 3, 1, 4, torch.float32
q, k, v = (torch.randn(B, T, H, D, dtype=dt) for _ in range(3))
eta = torch.rand(B, T, H, 1, dtype=dt) * 0.5
w, b = torch.rand(H, D, dtype=dt) + 0.5, torch.randn(H, D, dtype=dt) * 0.5
h0, hb0 = torch.randn(B, H, D, D, dtype=dt) * 0.3, torch.randn(B, H, 1, D, dtype=dt) * 0.3


def run(lo, hi, C, h, hb):
    return chunk_ttt_linear_ref(q[:, lo:hi].clone(), k[:, lo:hi].clone(), v[:, lo:hi].clone(), w, b,
                                eta[:, lo:hi].clone(), 1.0, 1e-6, C, h.clone(), hb.clone(), True)


o_pad, h_pad, hb_pad = run(0, 3, 2, h0, hb0)      # fla pads token 3 with zeros
_, h_2, hb_2 = run(0, 2, 2, h0, hb0)              # tokens 0, 1: one full mini-batch
o_cut, h_cut, hb_cut = run(2, 3, 1, h_2, hb_2)    # token 2 alone: the mini-batch cut at T
print("token 2 output, max |difference|:", (o_pad[:, 2] - o_cut[:, 0]).abs().max().item())
print("final h, max |difference|:", (h_pad - h_cut).abs().max().item())
print("final h_b, max |difference|:", (hb_pad - hb_cut).abs().max().item())
d_o, d_h, d_hb = ((o_pad[:, 2] - o_cut[:, 0]).abs().max().item(), (h_pad - h_cut).abs().max().item(),
                  (hb_pad - hb_cut).abs().max().item())
shown = d_o == 0 and d_h == 0 and d_hb > 1e-6
print(("SHOWN" if shown else "NOT SHOWN") + ": chunk_ttt_linear_ref lets the padding token into the final bias state"
      " (outputs and final h as without it)")
raise SystemExit(0 if shown else 1)
