"""fla's fused recurrent GDN2 loads its per-channel decay g without a mask: where K is not a power of
two it reads past the end of g.

Claim (docs/spec/py-backend.md#fla-ttt): `fused_recurrent_gdn2_fwd_kernel` (fla-core 0.5.2,
fla/ops/gdn2/fused_recurrent.py) loads `next_power_of_2(K)` channels of g per token with an
unmasked `tl.load(p_g)`, where its loads of q, k, b are masked by `o_k < K`. The channels past K
decay state rows that are zero, so the read changes nothing unless exp of what it reads is
infinite or NaN; then 0 · inf = NaN spreads into o and the final state.

What this script does, with torch and fla only: it places g at the front of a larger buffer whose
remainder holds +inf, runs the kernel at K = 3 and K = 4 with the same values, and counts NaN in o
and in the final state; the same call with 0 after g is the control (no NaN).

Run: /path/to/venv/bin/python repros/fla/gdn2_unmasked_gate_load.py   (CPU: Triton's interpreter is
switched on when torch sees no GPU). Exit 0 when the finding shows, 1 when not.
"""
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from fla.ops.gdn2 import fused_recurrent_gdn2  # noqa: E402

DEV = "cuda" if torch.cuda.is_available() else "cpu"
T, H, V = 2, 1, 4


def followed_by(t, value):
    """t at the front of a buffer whose remaining 1024 elements hold `value`."""
    buf = torch.full((t.numel() + 1024,), value, dtype=t.dtype, device=t.device)
    buf[:t.numel()] = t.reshape(-1)
    return buf[:t.numel()].view(t.shape)


def run(K, after):
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g).to(DEV)  # noqa: E731
    q, k, v = r(1, T, H, K), torch.nn.functional.normalize(r(1, T, H, K), dim=-1), r(1, T, H, V)
    gate = followed_by(-torch.rand(1, T, H, K, generator=g).to(DEV), after)
    b, w = torch.rand(1, T, H, K, generator=g).to(DEV), torch.rand(1, T, H, V, generator=g).to(DEV)
    h0 = r(1, H, K, V)
    o, ht = fused_recurrent_gdn2(q, k, v, gate, b, w, initial_state=h0, output_final_state=True)
    return int(torch.isnan(o).sum()), o.numel(), int(torch.isnan(ht).sum()), ht.numel()


def main():
    shown = True
    for K in (3, 4):
        for after in (float("inf"), 0.0):
            no, n_o, nh, n_h = run(K, after)
            print(f"fused_recurrent_gdn2: K={K}, {after} after g: NaN in o {no} of {n_o}, in the final state {nh} of {n_h}")
            expect_nan = K == 3 and after == float("inf")
            shown &= (no > 0 and nh > 0) if expect_nan else (no == 0 and nh == 0)
    print(("SHOWN" if shown else "NOT SHOWN") + ": at K = 3 fused_recurrent_gdn2 reads g past its end (inf there gives NaN "
          "in o and the final state); at K = 4, and with 0 after g, no NaN")
    return 0 if shown else 1


if __name__ == "__main__":
    raise SystemExit(main())
