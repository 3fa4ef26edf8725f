"""fla's `fused_recurrent_iplr_delta_rule` writes final states past the end of the one it allocates
for a packed batch.

Claim (docs/spec/py-backend.md#fla-new-rules): with `cu_seqlens` giving N sequences packed into
B = 1, the function allocates its final state for B sequences (`q.new_empty(B, H, K, V)`) while its
kernel stores one final state per sequence, N of them.

What this script does, with torch and fla only (no nl-conformance code): during the call, every
floating-point `Tensor.new_empty` returns the front of a buffer four times its size, filled with a
sentinel (NaN); after the call it prints the shape of the returned final state, whether the
sentinel region after it was written, and whether what was written there is the final state of
sequences 2..N as fla computes them one at a time (each sequence alone, unpacked).

Run: /path/to/venv/bin/python repros/fla/iplr_varlen_final_state.py   (CPU: Triton's interpreter
is switched on when torch sees no GPU). Exit 0 when the finding shows, 1 when not.
"""
import contextlib
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
if os.environ.get("TRITON_INTERPRET") == "1":  # the interpreter cannot benchmark: each autotuned kernel at its first configuration
    from triton.runtime.autotuner import Autotuner
    _prune = Autotuner.prune_configs
    Autotuner.prune_configs = lambda self, kwargs: _prune(self, kwargs)[:1]

from fla.ops.generalized_delta_rule import fused_recurrent_iplr_delta_rule  # noqa: E402

DEV = "cuda" if torch.cuda.is_available() else "cpu"
LENGTHS = [3, 5, 4]
H, K, V = 2, 4, 4


@contextlib.contextmanager
def guarded_new_empty(tails):
    """Floating-point Tensor.new_empty inside: the front of a NaN buffer four times the size; (view, tail) kept in `tails`."""
    plain = torch.Tensor.new_empty

    def guarded(self, *size, **kw):
        t = plain(self, *size, **kw)
        if not t.is_floating_point() or t.numel() == 0:
            return t
        buf = plain(self, 4 * t.numel(), **{k: x for k, x in kw.items() if k != "size"}).fill_(float("nan"))
        view = buf[:t.numel()].view(t.shape)
        tails.append((view, buf[t.numel():]))
        return view
    torch.Tensor.new_empty = guarded
    try:
        yield
    finally:
        torch.Tensor.new_empty = plain


def main():
    g = torch.Generator().manual_seed(0)
    T, N = sum(LENGTHS), len(LENGTHS)
    r = lambda *s: torch.randn(*s, generator=g).to(DEV)
    q, k, v = r(1, T, H, K), torch.nn.functional.normalize(r(1, T, H, K), dim=-1), r(1, T, H, V)
    a = -0.5 * torch.nn.functional.normalize(r(1, T, H, K), dim=-1)
    b = torch.nn.functional.normalize(r(1, T, H, K), dim=-1)
    h0 = r(N, H, K, V)
    cu = torch.tensor([0] + list(torch.tensor(LENGTHS).cumsum(0)), dtype=torch.long, device=DEV)
    tails = []
    with guarded_new_empty(tails):
        _, ht = fused_recurrent_iplr_delta_rule(q, k, v, a, b, initial_state=h0, output_final_state=True, cu_seqlens=cu)
    print(f"fla fused_recurrent_iplr_delta_rule, packed lengths {LENGTHS} (N = {N}, B = 1), H={H}, K=V={K}:")
    print(f"  returned final state shape {list(ht.shape)} (one state per sequence would be {[N, H, K, V]})")
    tail = next((t for view, t in tails if view.data_ptr() == ht.data_ptr()), None)
    written = 0 if tail is None else int((~torch.isnan(tail)).sum())
    print(f"  elements written after its end (in the sentinel region): {written} (states of {written // (H * K * V)} sequences)")
    alone = []
    for n in range(N):
        s, e = int(cu[n]), int(cu[n + 1])
        _, hn = fused_recurrent_iplr_delta_rule(q[:, s:e], k[:, s:e], v[:, s:e], a[:, s:e], b[:, s:e],
                                                initial_state=h0[n:n + 1], output_final_state=True)
        alone.append(hn[0])
    past = tail[:(N - 1) * H * K * V].view(N - 1, H, K, V) if tail is not None else None
    match = past is not None and all(torch.allclose(past[n - 1], alone[n], rtol=1e-5, atol=1e-6) for n in range(1, N))
    print(f"  what was written there is the final state of sequences 2..{N} run alone: {match}")
    print(f"  the returned state is sequence 1's run alone: {torch.allclose(ht[0], alone[0], rtol=1e-5, atol=1e-6)}")
    shown = list(ht.shape) == [1, H, K, V] and written == (N - 1) * H * K * V and match
    print(("SHOWN" if shown else "NOT SHOWN") + ": with cu_seqlens, fused_recurrent_iplr_delta_rule allocates one final "
          "state and its kernel stores N, the others past the allocation's end")
    return 0 if shown else 1


if __name__ == "__main__":
    raise SystemExit(main())
