"""A Gated DeltaProduct kernel in plain PyTorch with the signature and layout of fla's
`chunk_gated_delta_product` (q, k, v, g, beta, num_householder, scale, initial_state,
output_final_state, use_qk_l2norm_in_kernel): a token's n_h Householder steps lie along the time
axis, k and v [B, T·n_h, H, d] and beta [B, T·n_h, H], token t's steps at rows t·n_h .. t·n_h + n_h − 1;
q and g [B, T, H, ·]. A backward by autograd. The worked adaptor of `token_rows`
(docs/spec/py-backend.md#token-rows), judged without fla; examples/py-kernels/fla_gated_delta_product.py
declares fla's own kernels with the same lines.

    npx nlc --backend py:examples/py-kernels/delta_product_torch.py:delta_product --rule gated_delta_product
"""
import torch
import torch.nn.functional as F

from fla_deltanet import declared


def delta_product(q, k, v, g, beta, num_householder=1, scale=None, initial_state=None, output_final_state=False,
                  use_qk_l2norm_in_kernel=False, token_minor=False):
    """State [B, H, K, V] (key-major). `token_minor`: read step j of token t at row j·T + t instead of
    t·n_h + j (a planted bug)."""
    B, T, H, K = q.shape
    n = num_householder
    if k.shape != (B, T * n, H, K) or beta.shape != (B, T * n, H):
        raise ValueError(f"k needs [B, T*n_h, H, K] = {[B, T * n, H, K]} and beta [B, T*n_h, H], got {list(k.shape)}, {list(beta.shape)}")
    acc, out_dtype = torch.float32, v.dtype
    q, k, v, g, beta = (x.to(acc) for x in (q, k, v, g, beta))
    if use_qk_l2norm_in_kernel:
        q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
    q = q * (K ** -0.5 if scale is None else scale)
    S = q.new_zeros(B, H, K, v.shape[-1]) if initial_state is None else initial_state.to(acc)
    ys = []
    for t in range(T):
        S = S * g[:, t].exp()[..., None, None]
        for j in range(n):
            r = j * T + t if token_minor else t * n + j
            kr, vr, br = k[:, r], v[:, r], beta[:, r]
            err = vr - torch.einsum("bhkv,bhk->bhv", S, kr)
            S = S + br[..., None, None] * kr[..., :, None] * err[..., None, :]
        ys.append(torch.einsum("bhkv,bhk->bhv", S, q[:, t]))
    return torch.stack(ys, 1).to(out_dtype), (S if output_final_state else None)


DELTA_PRODUCT = {"rules": ["gated_delta_product"], "state_layout": "transposed", "names": {"theta": "beta"}, "bounded": ["theta"],
                 "log_gates": {"alpha": "g"}, "scale": {"keyword": "scale", "value": "rsqrt_dk"}, "qk_l2norm": "use_qk_l2norm_in_kernel",
                 "output_final_state": "output_final_state", "token_rows": {"layout": "time", "count": "num_householder"}}
delta_product = declared(delta_product, **DELTA_PRODUCT)
