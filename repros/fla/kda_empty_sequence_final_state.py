"""fla's `fused_recurrent_kda` leaves the final state of an empty sequence unwritten.

Claim (docs/spec/py-backend.md#fla-new-rules-gpu): in a packed batch (`cu_seqlens`) with empty
sequences, `fused_recurrent_kda(..., output_final_state=True)` returns, for each empty sequence, a
final state it never stored: `fused_recurrent_kda_fwd` allocates the final state with `new_empty`,
and its kernel returns early for a sequence with T == 0 (`if T == 0: return`) before the store.
For an empty sequence the final state should be the initial state (fla's own
`fused_recurrent_gated_delta_rule` returns h0 there).

What this script does, with torch and fla only (no nl-conformance code): it makes every
`Tensor.new_empty` during the call return memory filled with a sentinel (NaN), runs both kernels on
the same packed batch (lengths [0, 17, 0, 1, 0], H = 2, K = V = 4, a random initial state), and
prints, per sequence, whether the returned final state is the sentinel everywhere (never written),
equals the initial state, or is something else. Then it runs the same call without the sentinel,
three times, and prints how far the empty sequences' final states are from their initial states
(whatever memory the allocator hands back).

Run: /path/to/venv/bin/python repros/fla/kda_empty_sequence_final_state.py   (CPU: Triton's
interpreter is switched on when torch sees no GPU). Exit 0 when the finding shows, 1 when not.
"""
import contextlib
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule  # noqa: E402
from fla.ops.kda import fused_recurrent_kda  # noqa: E402

DEV = "cuda" if torch.cuda.is_available() else "cpu"
LENGTHS = [0, 17, 0, 1, 0]
H, K, V = 2, 4, 4


@contextlib.contextmanager
def sentinel_new_empty():
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


def inputs(seed):
    g = torch.Generator().manual_seed(seed)
    T, N = sum(LENGTHS), len(LENGTHS)
    r = lambda *s: torch.randn(*s, generator=g).to(DEV)
    q, k, v = r(1, T, H, K), torch.nn.functional.normalize(r(1, T, H, K), dim=-1), r(1, T, H, V)
    gk = -torch.rand(1, T, H, K, generator=g).to(DEV)           # log decays per key channel
    beta = torch.rand(1, T, H, generator=g).to(DEV)
    h0 = r(N, H, K, V)
    cu = torch.tensor([0] + list(torch.tensor(LENGTHS).cumsum(0)), dtype=torch.long, device=DEV)
    return q, k, v, gk, beta, h0, cu


def describe(ht, h0):
    out = []
    for n, L in enumerate(LENGTHS):
        s = ht[n]
        what = ("never written (sentinel everywhere)" if torch.isnan(s).all() else
                "the initial state" if torch.equal(s, h0[n]) else
                f"{int(torch.isnan(s).sum())} NaN" if torch.isnan(s).any() else "computed")
        out.append((L, what))
    return out


def main():
    q, k, v, gk, beta, h0, cu = inputs(0)
    with sentinel_new_empty():
        _, ht_kda = fused_recurrent_kda(q, k, v, gk, beta, initial_state=h0, output_final_state=True, cu_seqlens=cu)
        _, ht_gdn = fused_recurrent_gated_delta_rule(q, k, v, gk=gk, beta=beta, initial_state=h0, output_final_state=True,
                                                     cu_seqlens=cu)
    kda, gdn = describe(ht_kda, h0), describe(ht_gdn, h0)
    print(f"fla fused_recurrent_kda vs fused_recurrent_gated_delta_rule(gk=...), packed lengths {LENGTHS}, "
          f"H={H}, K=V={K}, new_empty filled with NaN:")
    for (L, a), (_, b) in zip(kda, gdn):
        print(f"  length {L:2d}: kda final state {a}; gated_delta_rule final state {b}")
    print("without the sentinel (three trials), max |final state - initial state| over the empty sequences:")
    spread = []
    for trial in range(3):
        q, k, v, gk, beta, h0, cu = inputs(trial + 1)
        _ = torch.randn(4096, device=DEV) * 1e6                # other work: memory for the allocator to hand back
        del _
        _, ht = fused_recurrent_kda(q, k, v, gk, beta, initial_state=h0, output_final_state=True, cu_seqlens=cu)
        d = max(float((ht[n] - h0[n]).abs().nan_to_num(float("inf")).max()) for n, L in enumerate(LENGTHS) if L == 0)
        spread.append(d)
        print(f"  trial {trial + 1}: {d:.3g}")
    # the computed sequences do not change when NaN follows k, q and beta in memory (here: on this device)
    q, k, v, gk, beta, h0, cu = inputs(0)

    def nan_after(t):
        buf = torch.full((t.numel() + 4096,), float("nan"), device=DEV)
        buf[:t.numel()] = t.reshape(-1)
        return buf[:t.numel()].view(t.shape)
    o_a, ht_a = fused_recurrent_kda(q, k, v, gk, beta, initial_state=h0, output_final_state=True, cu_seqlens=cu)
    o_b, ht_b = fused_recurrent_kda(nan_after(q), nan_after(k), v, gk, nan_after(beta), initial_state=h0,
                                    output_final_state=True, cu_seqlens=cu)
    same = torch.equal(o_a, o_b) and all(torch.equal(ht_a[n], ht_b[n]) for n, L in enumerate(LENGTHS) if L > 0)
    print(f"NaN placed after q, k and beta: y and the non-empty sequences' final states {'unchanged' if same else 'CHANGED'} "
          f"(device {DEV})")
    empty_unwritten = all(a == "never written (sentinel everywhere)" for L, a in kda if L == 0)
    others_written = all(a == "computed" for L, a in kda if L > 0)
    gdn_keeps_h0 = all(b == "the initial state" for L, b in gdn if L == 0)
    shown = empty_unwritten and others_written and gdn_keeps_h0
    print(("SHOWN" if shown else "NOT SHOWN") + ": fused_recurrent_kda leaves an empty sequence's final state unwritten "
          "(fused_recurrent_gated_delta_rule returns the initial state there)")
    return 0 if shown else 1


if __name__ == "__main__":
    raise SystemExit(main())
