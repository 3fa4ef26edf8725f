"""flash-linear-attention's Gated DeltaProduct kernels (fla-core 0.5.2) for the rule
`gated_delta_product`, each declared and nothing else (docs/spec/py-backend.md#fla-delta-product):

    NLC_TORCH_PYTHON=/path/to/venv/bin/python npx nlc --backend py:examples/py-kernels/fla_gated_delta_product.py:chunk_gated_delta_product

* fla lays a token's n_h Householder steps along the time axis, step-major: k, v are
  [B, T·n_h, H, d] and beta [B, T·n_h, H], token t's steps at rows t·n_h .. t·n_h + n_h − 1; q and the
  decay g stay [B, T, H, ·], and y is read once per token, after its last step. Declared with
  `token_rows` (layout "time"; n_h passed as the int `num_householder`): the kernel host moves our
  [B, T, H, n_h·d] (θ [B, T, H, n_h]) into those rows (docs/spec/py-backend.md#token-rows).
* g is the per-token decay in log space, applied before the token's first step; beta is our θ per
  step; the state is [N, H, K, V] (transposed).
* `chunk_gated_delta_product` (the WY/UT chunked form, chunks of 64 of the T·n_h rows; its backward
  is fla's chunked Gated DeltaNet backward over those rows) refuses f32 q ("does not support
  float32"): declared in bf16, g in f32, keeping its intermediates in bf16 (WY factors, corrected
  values and chunk states are stored in bf16: docs/spec/precision.md#intermediates). Given g = None
  it runs fla's chunked DeltaNet over the rows: DeltaProduct without decay, declared with alpha
  absent (`…_no_gate`); g has no default, so it is passed as None (`constants`).
* `naive_recurrent_gated_delta_product` (fla.ops.gated_delta_product.naive, fla's own reference in
  plain PyTorch, f32, autograd) takes `scale` and `cu_seqlens` without defaults and reads neither: it
  applies no query scale and runs a packed batch as one sequence. Declared without a scale and
  without packed batches, the two passed as constants (scale 1, cu_seqlens None).
"""
import fla_real  # noqa: F401  (Triton's interpreter without a GPU)

from fla.ops.gated_delta_product import chunk_gated_delta_product as _chunk_gated_delta_product
from fla.ops.gated_delta_product.naive import naive_recurrent_gated_delta_product as _naive_recurrent_gated_delta_product

from fla_deltanet import declared

FLA_CHUNK = 64
ROWS = {"layout": "time", "count": "num_householder"}
GDP = {"rules": ["gated_delta_product"], "state_layout": "transposed", "names": {"theta": "beta"}, "bounded": ["theta"],
       "log_gates": {"alpha": "g"}, "output_final_state": "output_final_state", "outputs": {"y": "o", "M": "final_state"}, "accumulate": "f32", "token_rows": ROWS}
CHUNK = {**GDP, "scale": {"keyword": "scale", "value": "rsqrt_dk"}, "qk_l2norm": "use_qk_l2norm_in_kernel", "varlen": "cu_seqlens",
         "dtype": "bf16", "input_dtypes": {"alpha": "f32"}, "chunk_size": FLA_CHUNK, "intermediates": "storage"}

chunk_gated_delta_product = declared(_chunk_gated_delta_product, **CHUNK)
chunk_gated_delta_product_no_gate = declared(_chunk_gated_delta_product, **{k: v for k, v in CHUNK.items() if k not in ("log_gates", "input_dtypes")},
                                             absent=["alpha"], constants={"g": None})
# fla's naive reference: no query scale (its `scale` is passed, as 1, and not read) and no packed batches
NAIVE = {**GDP, "constants": {"scale": 1.0, "cu_seqlens": None}}
naive_recurrent_gated_delta_product = declared(_naive_recurrent_gated_delta_product, **NAIVE)
# the same declared as taking its query scale by keyword, as fla's chunked kernel does: it fails at
# the scale edge (y twice ref64's at d = 4, docs/spec/py-backend.md#fla-delta-product), since it never reads it
naive_recurrent_gated_delta_product_scale_keyword = declared(_naive_recurrent_gated_delta_product, **GDP,
                                                             scale={"keyword": "scale", "value": 1}, constants={"cu_seqlens": None})
