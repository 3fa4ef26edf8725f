"""fla's chunked gated Oja backward returns NaN where the decay is saturated.

Claim (docs/spec/py-backend.md#fla-ttt): `chunk_gated_oja_rule` (fla-core 0.5.2,
fla/ops/gated_oja_rule) with the log decay gv = G at every token and channel (G = −30 and −80:
each token forgets the state almost entirely) returns a finite o and final state, but NaN in dv and
dgv (here at the tokens of the last, partial chunk); the exact gradients (the recurrence in f64, by autograd) are finite.
At G = −5 it has no NaN (the control).

What this script does, with torch and fla only: B = H = 1, T = 67 (two chunks of 64 and a partial
one), K = V = 4, f32 inputs, β = 0.5, a random initial state; loss = sum(o · do) + sum(final · dfinal)
with random do, dfinal; it counts NaN in o, the final state and each gradient, and prints the exact
dv's largest entry. fla's recurrence (its docstring and naive form): h ← h diag(exp gv_t),
h ← h + β_t (k_t − h v_t) v_tᵀ, o_t = hᵀ (q_t · K^−1/2).

Run: /path/to/venv/bin/python repros/fla/gated_oja_saturated_backward.py   (CPU: Triton's interpreter
is switched on when torch sees no GPU, with this repository's interpreter support for fla's chunked
kernels, python/nlc_torch/triton_cpu.py, which computes and judges nothing itself). Exit 0 when the
finding shows, 1 when not.
"""
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
if os.environ.get("TRITON_INTERPRET") == "1":  # the interpreter cannot benchmark: each autotuned kernel at its first configuration
    from triton.runtime.autotuner import Autotuner
    _prune = Autotuner.prune_configs
    Autotuner.prune_configs = lambda self, kwargs: _prune(self, kwargs)[:1]

from fla.ops.gated_oja_rule import chunk_gated_oja_rule  # noqa: E402

if os.environ.get("TRITON_INTERPRET") == "1":
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    from nlc_torch import triton_cpu  # noqa: E402
    triton_cpu.install()

DEV = "cuda" if torch.cuda.is_available() else "cpu"
B, T, H, K, V = 1, 67, 1, 4, 4


def exact(q, k, v, gv, beta, h0, do, dht):
    """fla's recurrence in f64; o, final state and the gradients by autograd."""
    xs = [x.double().detach().requires_grad_(True) for x in (q, k, v, gv, beta, h0)]
    q, k, v, gv, beta, h = xs
    h = h[0, 0]
    outs = []
    for t in range(T):
        h = h * gv[0, t, 0].exp()[None, :]
        kt, vt = k[0, t, 0], v[0, t, 0]
        h = h + beta[0, t, 0] * torch.outer(kt - h @ vt, vt)
        outs.append(h.T @ (q[0, t, 0] * K ** -0.5))
    loss = (torch.stack(outs) * do[0, :, 0].double()).sum() + (h * dht[0, 0].double()).sum()
    return torch.autograd.grad(loss, xs)


def main():
    shown = True
    for G in (-5.0, -30.0, -80.0):
        g = torch.Generator().manual_seed(0)
        r = lambda *s: torch.randn(*s, generator=g).to(DEV)  # noqa: E731
        q, k = r(B, T, H, K), torch.nn.functional.normalize(r(B, T, H, K), dim=-1)
        v = torch.nn.functional.normalize(r(B, T, H, V), dim=-1)
        gv = torch.full((B, T, H, V), G, device=DEV)
        beta = torch.full((B, T, H), 0.5, device=DEV)
        h0, do, dht = r(B, H, K, V), r(B, T, H, V), r(B, H, K, V)
        ins = [x.clone().requires_grad_(True) for x in (q, k, v, gv, beta, h0)]
        o, ht = chunk_gated_oja_rule(*ins[:5], initial_state=ins[5], output_final_state=True)
        grads = torch.autograd.grad((o * do).sum() + (ht * dht).sum(), ins)
        nan = {n: int(torch.isnan(x).sum()) for n, x in zip(("o", "final state", "dq", "dk", "dv", "dgv", "dbeta", "dh0"),
                                                             (o, ht, *grads))}
        ex = exact(q, k, v, gv, beta, h0, do, dht)
        finite = all(torch.isfinite(x).all() for x in ex)
        rows = [t for t in range(T) if torch.isnan(grads[2][0, t]).any()]
        print(f"gv = {G}: NaN counts {nan}; dv NaN at tokens {rows[:3]}{'…' if len(rows) > 3 else ''}; "
              f"exact gradients finite: {finite}, max |exact dv| {ex[2].abs().max().item():.3g}")
        forward_ok = nan["o"] == 0 and nan["final state"] == 0
        shown &= forward_ok and finite and ((nan["dv"] > 0 and nan["dgv"] > 0) if G <= -30 else sum(nan.values()) == 0)
    print(("SHOWN" if shown else "NOT SHOWN") + ": at gv = -30 and -80 chunk_gated_oja_rule's forward is finite and its dv, dgv "
          "hold NaN, where the exact gradients are finite; at gv = -5 none")
    return 0 if shown else 1


if __name__ == "__main__":
    raise SystemExit(main())
