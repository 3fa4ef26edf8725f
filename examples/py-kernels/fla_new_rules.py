"""flash-linear-attention's kernels for KDA, Comba and DPLR (fla-core 0.5.2), each declared and nothing
else (docs/spec/py-backend.md#fla-new-rules):

    NLC_TORCH_PYTHON=/path/to/venv/bin/python npx nlc --backend py:examples/py-kernels/fla_new_rules.py:fused_recurrent_kda

* KDA (`kda`): g [B, T, H, K] is a decay per key channel in log space (a channel gate: the same
  `log_gates` entry as Gated DeltaNet's g, one value per channel). The state is [N, H, K, V].
* Comba (`comba`): the second key p travels under its own name; g is per head, beta our theta.
* DPLR (`dplr`): fla's `a`, `b` are the rule's low-rank vectors, `gk` the per-channel decay in log space.
* fla's fused recurrent Gated DeltaNet given `gk` (a decay per key channel) instead of g is KDA.
* The same KDA kernel declared with its in-kernel parametrisations (`gate_forms`): the decay computed
  from a raw input, g = -exp(A_log) * softplus(raw + dt_bias) (`use_gate_in_kernel`), beta =
  sigmoid(raw) (`use_beta_sigmoid_in_kernel`), and beta = 2 sigmoid(raw) in (0, 2)
  (`allow_neg_eigval`); and with its state stored value-first (`constants`: state_v_first=True, a
  state [N, H, V, K], which is our layout).

fla's recurrent kernels for these rules have no backward (KDA's returns tensors outside autograd;
Comba's and DPLR's raise NotImplementedError): declared forward-only. fla's fused recurrent KDA reads
g with an unmasked load of next_power_of_2(K) channels, past the end of g when K is not a power of
two (the output is NaN where the memory after g holds a NaN or a value above ~88): declared for powers
of two (`head_dims`). Undeclared (`fused_recurrent_kda_all_dims`) its verdict depends on what lies
after g in memory: it failed (NaN in y) at seed 1 in one run and passed in another.

On a machine without a GPU the Triton kernels run in Triton's interpreter (fla_real.py sets it up),
the chunked kernels (`chunk_*`) included, through the kernel host's interpreter support
(python/nlc_torch/triton_cpu.py); on a GPU, ffi/gpu-checks.sh's fla step. fla's chunked kernels have
a backward (judged), except chunked IPLR's. IPLR (DPLR without decay) and RWKV-7 (DPLR with fla's
names r and w) are declared as `dplr`.
"""
import fla_real  # noqa: F401  (Triton's interpreter without a GPU, the first autotune configuration)

from fla.ops.comba import chunk_comba as _chunk_comba
from fla.ops.comba import fused_recurrent_comba as _fused_recurrent_comba
from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule as _fused_recurrent_gated_delta_rule
from fla.ops.generalized_delta_rule.dplr import chunk_dplr_delta_rule as _chunk_dplr
from fla.ops.generalized_delta_rule.dplr import fused_recurrent_dplr_delta_rule as _fused_recurrent_dplr
from fla.ops.generalized_delta_rule.iplr import chunk_iplr_delta_rule as _chunk_iplr
from fla.ops.generalized_delta_rule.iplr import fused_recurrent_iplr_delta_rule as _fused_recurrent_iplr
from fla.ops.kda import chunk_kda as _chunk_kda
from fla.ops.kda import fused_recurrent_kda as _fused_recurrent_kda
from fla.ops.rwkv7 import chunk_rwkv7 as _chunk_rwkv7
from fla.ops.rwkv7 import fused_recurrent_rwkv7 as _fused_recurrent_rwkv7

from fla_deltanet import declared

COMMON = {"state_layout": "transposed", "scale": {"keyword": "scale", "value": "rsqrt_dk"},
          "output_final_state": "output_final_state", "outputs": {"y": "o", "M": "final_state"}, "accumulate": "f32", "varlen": "cu_seqlens"}
KDA = {**COMMON, "rules": ["kda"], "names": {"theta": "beta"}, "bounded": ["theta"], "log_gates": {"alpha": "g"},
       "qk_l2norm": "use_qk_l2norm_in_kernel"}
COMBA = {**COMMON, "rules": ["comba"], "names": {"theta": "beta"}, "bounded": ["theta"], "log_gates": {"alpha": "g"}}
DPLR = {**COMMON, "rules": ["dplr"], "log_gates": {"alpha": "gk"}}

# fla's recurrent KDA leaves the final state of an empty packed sequence unwritten
# (repros/fla/kda_empty_sequence_final_state.py): declared without packed batches, as shipped with
# them in `fused_recurrent_kda_varlen` (which fails at the empty-sequence case)
KDA_RECURRENT = {k: v for k, v in KDA.items() if k != "varlen"}
fused_recurrent_kda = declared(_fused_recurrent_kda, **KDA_RECURRENT, forward_only=True, head_dims="pow2")
fused_recurrent_kda_varlen = declared(_fused_recurrent_kda, **KDA, forward_only=True, head_dims="pow2")
fused_recurrent_comba = declared(_fused_recurrent_comba, **COMBA, forward_only=True)
fused_recurrent_dplr_delta_rule = declared(_fused_recurrent_dplr, **DPLR, forward_only=True)
# fla's fused recurrent Gated DeltaNet with a decay per key channel (`gk` [B, T, H, K], g not passed)
# is KDA (docs/spec/decisions.md#fla-vocabulary); it loads gk as KDA loads g, unmasked
fused_recurrent_gated_delta_rule_gk = declared(_fused_recurrent_gated_delta_rule, **{**KDA, "log_gates": {"alpha": "gk"}},
                                               forward_only=True, head_dims="pow2")

# KDA's in-kernel gate and beta: the kernel receives raw values and the per-head A_log, dt_bias
KDA_IN_KERNEL = {**{k: v for k, v in KDA.items() if k not in ("log_gates", "bounded", "varlen")}, "names": {"theta": "beta", "alpha": "g"},
                 "gate_forms": {"alpha": {"form": "softplus", "flag": "use_gate_in_kernel", "A_log": "A_log", "dt_bias": "dt_bias"},
                                "theta": {"form": "sigmoid", "flag": "use_beta_sigmoid_in_kernel"}}}
fused_recurrent_kda_gate_in_kernel = declared(_fused_recurrent_kda, **KDA_IN_KERNEL, forward_only=True, head_dims="pow2")
KDA_NEG_EIGVAL = {**KDA_IN_KERNEL, "gate_forms": {**KDA_IN_KERNEL["gate_forms"],
                                                  "theta": {"form": "sigmoid2", "flag": ["use_beta_sigmoid_in_kernel", "allow_neg_eigval"]}}}
fused_recurrent_kda_neg_eigval = declared(_fused_recurrent_kda, **KDA_NEG_EIGVAL, forward_only=True, head_dims="pow2")
# the state stored value-first: [N, H, V, K] is our M's own layout
fused_recurrent_kda_v_first = declared(_fused_recurrent_kda, **{**KDA_RECURRENT, "state_layout": "ours"}, constants={"state_v_first": True},
                                       forward_only=True, head_dims="pow2")

# fla's chunked kernels (chunks of 64 tokens), forward and backward: f32 and, with
# g kept in f32 beside bf16 q, k, v, as fla is used in training (`input_dtypes`)
FLA_CHUNK = 64
chunk_kda = declared(_chunk_kda, **KDA, chunk_size=FLA_CHUNK)
chunk_kda_bf16 = declared(_chunk_kda, **KDA, dtype="bf16", input_dtypes={"alpha": "f32", "theta": "f32"}, chunk_size=FLA_CHUNK)
chunk_kda_gate_in_kernel = declared(_chunk_kda, **KDA_IN_KERNEL, varlen="cu_seqlens", chunk_size=FLA_CHUNK)
chunk_comba = declared(_chunk_comba, **COMBA, chunk_size=FLA_CHUNK)
# fla's chunked DPLR takes its chunk size as a keyword: passed through (`constants`), and declared where the boundaries are
chunk_dplr_delta_rule = declared(_chunk_dplr, **DPLR, chunk_size=FLA_CHUNK, constants={"chunk_size": FLA_CHUNK})
# bf16 q, k, v (and p, a, b), the gates in f32, declared as keeping intermediates in bf16 (their WY
# factors, corrected values and chunk states are stored in bf16): docs/spec/precision.md#intermediates
chunk_kda_bf16_stored = declared(_chunk_kda, **KDA, dtype="bf16", input_dtypes={"alpha": "f32", "theta": "f32"},
                                 chunk_size=FLA_CHUNK, intermediates="storage")
chunk_comba_bf16_stored = declared(_chunk_comba, **COMBA, dtype="bf16", input_dtypes={"alpha": "f32", "theta": "f32"},
                                   chunk_size=FLA_CHUNK, intermediates="storage")
chunk_dplr_delta_rule_bf16_stored = declared(_chunk_dplr, **DPLR, dtype="bf16", input_dtypes={"alpha": "f32"}, chunk_size=FLA_CHUNK,
                                             constants={"chunk_size": FLA_CHUNK}, intermediates="storage")

# IPLR is DPLR without the decay (`absent`: alpha = 0, not sent). fla's recurrent IPLR has a backward
# of its own; its chunked one raises NotImplementedError in backward (forward-only), chunks of 64.
# fla's recurrent IPLR allocates its final state for B sequences where cu_seqlens gives N > B and
# writes N states into it (past its end): declared without packed batches (`_varlen` declares them)
IPLR = {**COMMON, "rules": ["dplr"], "absent": ["alpha"]}
fused_recurrent_iplr_delta_rule = declared(_fused_recurrent_iplr, **{k: v for k, v in IPLR.items() if k != "varlen"})
fused_recurrent_iplr_delta_rule_varlen = declared(_fused_recurrent_iplr, **IPLR)
chunk_iplr_delta_rule = declared(_chunk_iplr, **IPLR, chunk_size=FLA_CHUNK, forward_only=True)
# RWKV-7 is DPLR: fla's rwkv7 functions call the DPLR kernels with q = r and gk = w. The chunked one
# as it ships, in chunks of 16 (fla's default for DPLR)
RWKV7 = {**COMMON, "rules": ["dplr"], "names": {"q": "r"}, "log_gates": {"alpha": "w"}}
fused_recurrent_rwkv7 = declared(_fused_recurrent_rwkv7, **RWKV7, forward_only=True)
chunk_rwkv7 = declared(_chunk_rwkv7, **RWKV7, chunk_size=16)

# the same kernel at every head dimension: NaN where K is not a power of two and the memory after g is large (see above)
fused_recurrent_kda_all_dims = declared(_fused_recurrent_kda, **KDA_RECURRENT, forward_only=True)
