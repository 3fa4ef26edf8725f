"""fla's `fused_recurrent_gdn2` leaves the final state of an empty sequence unwritten.

Claim (docs/spec/py-backend.md#fla-ttt): in a packed batch (`cu_seqlens`) with empty sequences,
`fused_recurrent_gdn2(..., output_final_state=True)` (fla-core 0.5.2, fla/ops/gdn2/fused_recurrent.py)
returns, for each empty sequence, a final state it never stored: `fused_recurrent_gdn2_fwd`
allocates the final state with `new_empty`, and its kernel returns for a sequence with T == 0
(`if T == 0: return`) before the store. The final state of an empty sequence is its initial state.

What this script does, with torch and fla only: it makes every floating-point `Tensor.new_empty`
during the call return memory filled with NaN, runs the kernel on a packed batch (lengths
[0, 17, 0, 1, 0], H = 2, K = V = 4, a random initial state) and prints, per sequence, whether the
returned final state is NaN everywhere (never written), equals the initial state, or is computed.

Run: /path/to/venv/bin/python repros/fla/gdn2_empty_sequence_final_state.py   (CPU: Triton's
interpreter is switched on when torch sees no GPU). Exit 0 when the finding shows, 1 when not.
"""
import contextlib
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from fla.ops.gdn2 import fused_recurrent_gdn2  # noqa: E402

DEV = "cuda" if torch.cuda.is_available() else "cpu"
LENGTHS = [0, 17, 0, 1, 0]
H, K, V = 2, 4, 4


@contextlib.contextmanager
def nan_new_empty():
    """Every floating-point Tensor.new_empty inside returns memory filled with NaN."""
    plain = torch.Tensor.new_empty

    def filled(self, *size, **kw):
        t = plain(self, *size, **kw)
        return t.fill_(float("nan")) if t.is_floating_point() else t
    torch.Tensor.new_empty = filled
    try:
        yield
    finally:
        torch.Tensor.new_empty = plain


def main():
    g = torch.Generator().manual_seed(0)
    T, N = sum(LENGTHS), len(LENGTHS)
    r = lambda *s: torch.randn(*s, generator=g).to(DEV)  # noqa: E731
    q, k, v = r(1, T, H, K), torch.nn.functional.normalize(r(1, T, H, K), dim=-1), r(1, T, H, V)
    gate = -torch.rand(1, T, H, K, generator=g).to(DEV)
    b, w = torch.rand(1, T, H, K, generator=g).to(DEV), torch.rand(1, T, H, V, generator=g).to(DEV)
    h0 = r(N, H, K, V)
    cu = torch.tensor([0] + list(torch.tensor(LENGTHS).cumsum(0)), dtype=torch.long, device=DEV)
    with nan_new_empty():
        _, ht = fused_recurrent_gdn2(q, k, v, gate, b, w, initial_state=h0, output_final_state=True, cu_seqlens=cu)
    shown = True
    for n, L in enumerate(LENGTHS):
        s = ht[n]
        what = ("never written (NaN everywhere)" if torch.isnan(s).all() else "the initial state" if torch.equal(s, h0[n])
                else f"{int(torch.isnan(s).sum())} NaN" if torch.isnan(s).any() else "computed")
        print(f"  length {L:2d}: final state {what}")
        shown &= what == ("never written (NaN everywhere)" if L == 0 else "computed")
    print(("SHOWN" if shown else "NOT SHOWN") + ": fused_recurrent_gdn2 leaves an empty sequence's final state unwritten")
    return 0 if shown else 1


if __name__ == "__main__":
    raise SystemExit(main())
