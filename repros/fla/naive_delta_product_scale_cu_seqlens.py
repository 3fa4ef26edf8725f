"""fla's `naive_recurrent_gated_delta_product` takes `scale` and `cu_seqlens` and reads neither.

Claim (docs/spec/py-backend.md#fla-delta-product): the plain-PyTorch reference
(`fla.ops.gated_delta_product.naive`) requires both arguments, applies no query scale, and runs a
packed batch as one sequence.

What this script does, with torch and fla only (no nl-conformance code): it calls the function with
scale 1.0 and 0.5 (the outputs are bitwise equal), and with cu_seqlens None and [0, 3, T] (bitwise
equal), and shows the second packed sequence run alone from a zero state differs from its slice of
the packed output.

Run: /path/to/venv/bin/python repros/fla/naive_delta_product_scale_cu_seqlens.py (no Triton kernel
is involved). Exit 0 when the finding shows, 1 when not.
"""
import torch

from fla.ops.gated_delta_product.naive import naive_recurrent_gated_delta_product as naive


def main():
    g = torch.Generator().manual_seed(0)
    B, T, H, K, V, n = 1, 6, 1, 4, 4, 2
    q = torch.randn(B, T, H, K, generator=g)
    k = torch.nn.functional.normalize(torch.randn(B, T * n, H, K, generator=g), dim=-1)
    v = torch.randn(B, T * n, H, V, generator=g)
    gate = -torch.rand(B, T, H, generator=g)
    beta = torch.rand(B, T * n, H, generator=g)
    run = lambda scale, cu, s=slice(None), sn=slice(None): naive(q[:, s], k[:, sn], v[:, sn], gate[:, s], beta[:, sn], scale, cu,
                                                                  output_final_state=True, num_householder=n)[0]
    o1, o_half = run(1.0, None), run(0.5, None)
    cu = torch.tensor([0, 3, T])
    o_packed = run(1.0, cu)
    o_second = run(1.0, None, slice(3, T), slice(3 * n, T * n))
    scale_ignored = torch.equal(o1, o_half)
    cu_ignored = torch.equal(o1, o_packed)
    second_differs = not torch.allclose(o_packed[:, 3:], o_second)
    print(f"naive_recurrent_gated_delta_product (B={B}, T={T}, H={H}, K=V={K}, num_householder={n}):")
    print(f"  o with scale 0.5 bitwise equal to o with scale 1.0: {scale_ignored}")
    print(f"  o with cu_seqlens [0, 3, {T}] bitwise equal to o without: {cu_ignored}")
    print(f"  the second packed sequence run alone differs from its slice of the packed output: {second_differs} "
          f"(max |diff| {float((o_packed[:, 3:] - o_second).abs().max()):.3g})")
    shown = scale_ignored and cu_ignored and second_differs
    print(("SHOWN" if shown else "NOT SHOWN") + ": naive_recurrent_gated_delta_product reads neither scale nor cu_seqlens")
    return 0 if shown else 1


if __name__ == "__main__":
    raise SystemExit(main())
