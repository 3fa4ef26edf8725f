"""fla's fused recurrent KDA (and fused recurrent Gated DeltaNet given `gk`) load the per-channel
gate without a mask: where K is not a power of two they read past the end of g (gk).

Claim (docs/spec/py-backend.md#fla-new-rules): `fused_recurrent_kda_fwd_kernel` loads
`next_power_of_2(K)` channels of g per token with an unmasked `tl.load(p_g)`; the channels past K
decay state rows that are zero, so the read changes nothing unless exp of what it reads is infinite
or NaN — then 0 · inf = NaN spreads into o and the final state. `fused_recurrent_gated_delta_rule`
with `gk` loads gk the same way.

What this script does, with torch and fla only (no nl-conformance code): it places g (gk) at the
front of a larger buffer whose remainder holds +inf, runs each kernel at K = 3 and K = 4 with the
same values, and counts NaN in o and in the final state; the same call with a buffer holding 0 after
g is the control (no NaN).

Run: /path/to/venv/bin/python repros/fla/unmasked_gate_load.py   (CPU: Triton's interpreter is
switched on when torch sees no GPU). Exit 0 when the finding shows, 1 when not.
"""
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
if os.environ.get("TRITON_INTERPRET") == "1":  # the interpreter cannot benchmark: each autotuned kernel at its first configuration
    from triton.runtime.autotuner import Autotuner
    _prune = Autotuner.prune_configs
    Autotuner.prune_configs = lambda self, kwargs: _prune(self, kwargs)[:1]

from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule  # noqa: E402
from fla.ops.kda import fused_recurrent_kda  # noqa: E402

DEV = "cuda" if torch.cuda.is_available() else "cpu"
T, H, V = 2, 1, 4


def followed_by(t, value):
    """t at the front of a buffer whose remaining 1024 elements hold `value`."""
    buf = torch.full((t.numel() + 1024,), value, dtype=t.dtype, device=t.device)
    buf[:t.numel()] = t.reshape(-1)
    return buf[:t.numel()].view(t.shape)


def run(kernel, K, after):
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g).to(DEV)
    q, k, v = r(1, T, H, K), torch.nn.functional.normalize(r(1, T, H, K), dim=-1), r(1, T, H, V)
    gate = followed_by(-torch.rand(1, T, H, K, generator=g).to(DEV), after)
    beta = torch.rand(1, T, H, generator=g).to(DEV)
    h0 = r(1, H, K, V)
    if kernel == "fused_recurrent_kda":
        o, ht = fused_recurrent_kda(q, k, v, gate, beta, initial_state=h0, output_final_state=True)
    else:
        o, ht = fused_recurrent_gated_delta_rule(q, k, v, gk=gate, beta=beta, initial_state=h0, output_final_state=True)
    return int(torch.isnan(o).sum()), o.numel(), int(torch.isnan(ht).sum()), ht.numel()


def main():
    shown = True
    for kernel in ("fused_recurrent_kda", "fused_recurrent_gated_delta_rule(gk=...)"):
        for K in (3, 4):
            for after in (float("inf"), 0.0):
                no, n_o, nh, n_h = run(kernel, K, after)
                print(f"{kernel}: K={K}, {after} after the gate: NaN in o {no} of {n_o}, in the final state {nh} of {n_h}")
                expect_nan = K == 3 and after == float("inf")
                shown &= (no > 0 and nh > 0) if expect_nan else (no == 0 and nh == 0)
    print(("SHOWN" if shown else "NOT SHOWN") + ": at K = 3 both kernels read the gate past its end (inf there gives NaN "
          "in o and the final state); at K = 4, and with 0 after the gate, no NaN")
    return 0 if shown else 1


if __name__ == "__main__":
    raise SystemExit(main())
