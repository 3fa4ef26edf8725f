"""fla's chunked Gated DeltaProduct backward leaves a residue in dg where the decay is saturated.

Claim (docs/spec/py-backend.md#fla-delta-product): with the log decay g = −60 at every token
(exp(g) ≈ 9e-27: each token forgets the state), the exact dg is of the order of 1e-26;
`chunk_gated_delta_product` returns dg some 1e18 times larger. The DeltaProduct backward runs fla's
chunked Gated DeltaNet backward over the T·n_h rows (g at a token's first row, 0 at the others).

What this script does, with torch and fla only (no nl-conformance code): B = H = 1, T = 8,
K = V = 4, n_h = 2, bf16 q, k, v, f32 g = −60 and β; loss = sum(o · do) + sum(final · dfinal) with
random do, dfinal; it prints max |dg| from `chunk_gated_delta_product`, from
`chunk_gated_delta_rule` over the same T·n_h rows (g placed at each token's first row) on those first
rows, from the f64 PyTorch recurrence (the exact value, by autograd), and from
`chunk_gated_delta_rule` on T tokens of one step each beside that case's exact dg.

Run: /path/to/venv/bin/python repros/fla/delta_product_dg_residue.py   (CPU: Triton's interpreter is
switched on when torch sees no GPU, with this repository's interpreter support for fla's chunked
kernels, python/nlc_torch/triton_cpu.py, which computes and judges nothing itself). Exit 0 when the finding shows, 1 when not.
"""
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
if os.environ.get("TRITON_INTERPRET") == "1":  # the interpreter cannot benchmark: each autotuned kernel at its first configuration
    from triton.runtime.autotuner import Autotuner
    _prune = Autotuner.prune_configs
    Autotuner.prune_configs = lambda self, kwargs: _prune(self, kwargs)[:1]

from fla.ops.gated_delta_product import chunk_gated_delta_product  # noqa: E402
from fla.ops.gated_delta_rule import chunk_gated_delta_rule  # noqa: E402

if os.environ.get("TRITON_INTERPRET") == "1":
    # fla's chunked kernels do bf16 arithmetic and call .to() on loop variables, which Triton's
    # interpreter gets wrong or refuses; this repository's interpreter support (it judges nothing)
    # makes them compute what they compute on a GPU
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
    from nlc_torch import triton_cpu  # noqa: E402
    triton_cpu.install()

DEV = "cuda" if torch.cuda.is_available() else "cpu"
B, T, H, K, V, N_H, G = 1, 8, 1, 4, 4, 2, -60.0


def exact_dg(q, k, v, g, beta, h0, do, dht, n_h=N_H):
    """The recurrence in f64 (decay once per token, then n_h delta steps; o read after the last), dg by autograd."""
    q, k, v, beta, h0, do, dht = (x.double() for x in (q, k, v, beta, h0, do, dht))
    g = g.double().requires_grad_(True)
    h, outs = h0, []
    for t in range(T):
        h = h * g[0, t, 0].exp()
        for j in range(n_h):
            r = t * n_h + j
            kk, vv, bb = k[0, r, 0], v[0, r, 0], beta[0, r, 0]
            h = h + bb * torch.outer(kk, vv - h.T @ kk)
        outs.append(h.T @ (q[0, t, 0] * K ** -0.5))
    loss = (torch.stack(outs) * do[0, :, 0]).sum() + (h * dht[0, 0]).sum()
    return torch.autograd.grad(loss, g)[0]


def main():
    gen = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=gen)
    q = r(B, T, H, K).to(torch.bfloat16)
    k = torch.nn.functional.normalize(r(B, T * N_H, H, K), dim=-1).to(torch.bfloat16)
    v = r(B, T * N_H, H, V).to(torch.bfloat16)
    beta = torch.rand(B, T * N_H, H, generator=gen)
    g = torch.full((B, T, H), G)
    h0, do, dht = r(B, H, K, V), r(B, T, H, V).to(torch.bfloat16), r(B, H, K, V)
    dev = lambda x: x.detach().clone().to(DEV).requires_grad_(x.is_floating_point())

    qd, kd, vd, gd, bd, h0d = map(dev, (q, k, v, g, beta, h0))
    o, ht = chunk_gated_delta_product(qd, kd, vd, gd, bd, N_H, scale=K ** -0.5, initial_state=h0d, output_final_state=True)
    torch.autograd.backward([o, ht], [do.to(DEV), dht.to(DEV)])
    dg_product = gd.grad.float().abs().max().item()

    # fla's chunked Gated DeltaNet over the T·n_h rows: g at each token's first row, 0 at the others; q and do at its last
    rows = T * N_H
    g_rows = torch.zeros(B, rows, H)
    g_rows[:, ::N_H] = g
    q_rows = torch.zeros(B, rows, H, K, dtype=torch.bfloat16)
    q_rows[:, N_H - 1::N_H] = q
    do_rows = torch.zeros(B, rows, H, V, dtype=torch.bfloat16)
    do_rows[:, N_H - 1::N_H] = do
    qr, kr, vr, gr, br, h0r = map(dev, (q_rows, k, v, g_rows, beta, h0))
    o2, ht2 = chunk_gated_delta_rule(qr, kr, vr, gr, br, scale=K ** -0.5, initial_state=h0r, output_final_state=True)
    torch.autograd.backward([o2, ht2], [do_rows.to(DEV), dht.to(DEV)])
    dg_rule_first_rows = gr.grad[:, ::N_H].float().abs().max().item()

    dg_exact = exact_dg(q.float(), k.float(), v.float(), g, beta, h0[0, 0], do.float(), dht).abs().max().item()

    # fla's chunked Gated DeltaNet on T tokens of one step each (the first step's k, v, beta of every token)
    k1, v1, b1 = k[:, ::N_H], v[:, ::N_H], beta[:, ::N_H]
    q1d, k1d, v1d, g1d, b1d, h01d = map(dev, (q, k1, v1, g, b1, h0))
    o3, ht3 = chunk_gated_delta_rule(q1d, k1d, v1d, g1d, b1d, scale=K ** -0.5, initial_state=h01d, output_final_state=True)
    torch.autograd.backward([o3, ht3], [do.to(DEV), dht.to(DEV)])
    dg_rule = g1d.grad.float().abs().max().item()
    dg_rule_exact = exact_dg(q.float(), k1.float(), v1.float(), g, b1, h0[0, 0], do.float(), dht, 1).abs().max().item()
    print(f"B={B} T={T} H={H} K=V={K} n_h={N_H}, g = {G} at every token, bf16 q/k/v (device {DEV}):")
    print(f"  max |dg| chunk_gated_delta_product:                    {dg_product:.3g}")
    print(f"  max |dg| chunk_gated_delta_rule on the first-step rows: {dg_rule_first_rows:.3g}")
    print(f"  max |dg| exact (f64 recurrence, autograd):              {dg_exact:.3g}")
    print(f"  max |dg| chunk_gated_delta_rule on T tokens of one step: {dg_rule:.3g} (exact {dg_rule_exact:.3g})")
    print(f"  fla's chunked Gated DeltaNet backward on the same rows gives {'the same' if dg_rule_first_rows == dg_product else 'a different'} "
          f"dg on the first-step rows; on T single-step tokens its dg is {dg_rule / max(dg_rule_exact, 1e-300):.3g} times the exact")
    shown = dg_product > 1e6 * max(dg_exact, 1e-30)
    print(("SHOWN" if shown else "NOT SHOWN") + ": at a saturated decay the chunked DeltaProduct backward's dg is more than "
          "1e6 times the exact dg")
    return 0 if shown else 1


if __name__ == "__main__":
    raise SystemExit(main())
