#!/usr/bin/env bash
# The checks that need an NVIDIA GPU, in one go (cuda/README.md#on-a-gpu): the CUDA builds, C5 on
# the three CUDA builds (default profile, then the regime profile), the kernel benchmark, the
# `py:` kernels on the GPU (ours in PyTorch; fla's Triton kernels where `fla` imports), and last the
# whole default run. Every step has its own time limit (STEP_S, default 240 s), logs to OUTDIR and
# goes on after a failure (the fla steps: FLA_STEP_S, default 300 s, one per kernel); the exit status
# is the number of steps that did not end with 0.
#     bash ffi/gpu-checks.sh OUTDIR [STEP...]      (steps: env build c5 regime bench py fla default)
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/node_modules/.bin:$PATH"
out=${1:?usage: bash ffi/gpu-checks.sh OUTDIR [STEP...]}
shift
steps=${*:-env build c5 regime bench py fla default}
mkdir -p "$out"
export NLC_BUILD_CUDA=1 PYTHONUNBUFFERED=1
export NLC_TORCH_PYTHON=${NLC_TORCH_PYTHON:-$(command -v python3)}
t0=$SECONDS
bad=0
run() { # name command...
  local name=$1
  shift
  printf '\n== [%4d s] %s: %s\n' $((SECONDS - t0)) "$name" "$*"
  timeout -k 5 "${STEP_S:-240}" "$@" >"$out/$name.log" 2>&1
  local rc=$?
  tail -n "${TAIL:-12}" "$out/$name.log"
  printf '== [%4d s] %s: exit %d\n' $((SECONDS - t0)) "$name" "$rc"
  [ "$rc" = 0 ] || bad=$((bad + 1))
}
has() { case " $steps " in *" $1 "*) return 0 ;; esac; return 1; }
cuda=(--backend cuda --backend cuda-f32 --backend cuda-bf16)
ours="examples/py-kernels"
if has env; then
  run env bash -c "nvidia-smi -L; nvcc --version | tail -2; g++ --version | head -1; bun --version;
    $NLC_TORCH_PYTHON -c 'import torch, triton; print(\"torch\", torch.__version__, \"cuda\", torch.cuda.is_available(), \"triton\", triton.__version__)'"
fi
has build && run build bun ffi/build.ts cpu cpu-test cuda cuda-f32 cuda-bf16
has c5 && run c5 bun conformance/cli.ts --filter C5 "${cuda[@]}" --report "$out/c5-cuda.json"
has regime && run regime bun conformance/cli.ts --filter C5 --profile regime --backend cuda --backend cuda-bf16 --report "$out/c5-cuda-regime.json"
has bench && run bench bash -c "bun bench/kernels.ts --backend cuda --quick && cp reports/bench-kernels-cuda.json '$out/'"
if has py; then
  run py bun conformance/cli.ts --filter C5/py- --report "$out/py-gpu.json" \
    --backend "py:$ours/naive_delta.py:naive_delta" --backend "py:$ours/naive_titans.py:naive_titans" \
    --backend "py:$ours/fla_deltanet.py:chunk_delta_rule" --backend "py:$ours/fla_deltanet.py:chunk_gated_delta_rule" \
    --backend "py:$ours/fla_deltanet.py:chunk_gated_delta_rule_bf16" --backend "py:$ours/deltanet_lowprec.py:recurrent_delta_bf16" --backend "py:$ours/deltanet_lowprec.py:chunk_delta_f16"
fi
if has fla; then
  # fla's Triton kernels under every autotune configuration of every Triton kernel a call reaches
  # (docs/spec/py-backend.md#configurations). Each configuration is a compilation, so the quick
  # profile, one run per kernel (a run cut by its limit loses that kernel's report only) with a
  # limit of its own (FLA_STEP_S, default 300 s), the most telling kernel first. NLC_KERNEL_CONFIGS=first
  # judges each kernel's first configuration only, and the report says so.
  export NLC_KERNEL_CONFIGS=${NLC_KERNEL_CONFIGS:-all}
  for k in chunk_delta_rule_bf16_stored chunk_gated_delta_rule chunk_gated_delta_rule_bf16_stored fused_recurrent_delta_rule; do
    STEP_S=${FLA_STEP_S:-300} run "fla-$k" bun conformance/cli.ts --filter C5/py- --profile quick --report "$out/fla-$k.json" \
      --backend "py:$ours/fla_real.py:$k"
    # per check: its verdict and each configuration judged (cases, kernel ms), or what was not judged
    [ -f "$out/fla-$k.json" ] && bun -e '
      const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
      for (const c of r.checks) {
        if (c.status === "skip") continue;
        const k = c.details?.configurations;
        const ms = k ? k.judged.reduce((s, j) => s + j.ms, 0) : 0;
        console.log(c.id, c.status, k ? `${k.judged.length} configurations judged (${Math.round(ms)} ms of kernel calls), ${k.not_judged.length} not judged` : "one configuration");
        if (c.status !== "pass") console.log("   ", String(c.message).slice(0, 400));
      }' "$out/fla-$k.json" | tee -a "$out/fla-configurations.txt"
  done
  # TF32 (docs/spec/precision.md#tf32-gpu): fla's f32 chunked kernels, their dots in TF32 on compute
  # capability 8 and up, must pass declared tf32 (examples/py-kernels/fla_tf32.py) and fail declared f32
  # (judged in the steps above and below); Gated DeltaNet at seeds 1-3, KDA, Comba, DPLR and RWKV-7 at
  # seed 1, first configuration. Read fla-tf32-*.json: forward and backward must pass.
  for s in 1 2 3; do
    NLC_KERNEL_CONFIGS=first STEP_S=${FLA_STEP_S:-300} run "fla-tf32-seed$s" bun conformance/cli.ts --filter C5/py- \
      --profile quick --seed "$s" --report "$out/fla-tf32-seed$s.json" --backend "py:$ours/fla_tf32.py:chunk_gated_delta_rule_tf32"
  done
  t="py:$ours/fla_tf32.py"
  NLC_KERNEL_CONFIGS=first STEP_S=${FLA_STEP_S:-300} run fla-tf32-new-rules bun conformance/cli.ts --filter C5/py- --profile quick \
    --report "$out/fla-tf32-new-rules.json" --backend "$t:chunk_kda_tf32" --backend "$t:chunk_comba_tf32" \
    --backend "$t:chunk_dplr_delta_rule_tf32" --backend "$t:chunk_rwkv7_tf32"
  # KDA, Comba, DPLR (docs/spec/py-backend.md#fla-new-rules): recurrent and chunked, the in-kernel gate
  # forms, the value-first state, bf16 with f32 gates (plain and storing intermediates), IPLR and RWKV-7
  # as DPLR; the six plants (recurrent and chunked) must fail (the step then
  # reads as not passed: judge it by fla-new-rules-gpu.json, where only the planted kernels fail)
  n="py:$ours/fla_new_rules.py" p="py:$ours/fla_new_rules_planted.py"
  # one configuration each (NLC_KERNEL_CONFIGS=first): twenty-four kernels under every configuration would not fit a lease
  NLC_KERNEL_CONFIGS=first run fla-new-rules bun conformance/cli.ts --filter C5/py- --report "$out/fla-new-rules-gpu.json" \
    --backend "$n:fused_recurrent_kda" --backend "$n:fused_recurrent_comba" --backend "$n:fused_recurrent_dplr_delta_rule" \
    --backend "$n:fused_recurrent_kda_gate_in_kernel" --backend "$n:fused_recurrent_kda_neg_eigval" --backend "$n:fused_recurrent_kda_v_first" \
    --backend "$n:chunk_kda" --backend "$n:chunk_kda_bf16" --backend "$n:chunk_kda_gate_in_kernel" \
    --backend "$n:chunk_comba" --backend "$n:chunk_dplr_delta_rule" \
    --backend "$n:chunk_kda_bf16_stored" --backend "$n:chunk_comba_bf16_stored" --backend "$n:chunk_dplr_delta_rule_bf16_stored" \
    --backend "$n:fused_recurrent_iplr_delta_rule" --backend "$n:chunk_iplr_delta_rule" --backend "$n:fused_recurrent_rwkv7" --backend "$n:chunk_rwkv7" \
    --backend "$p:kda_reversed_channels" --backend "$p:comba_reads_k" --backend "$p:dplr_decayed_read" \
    --backend "$p:chunk_kda_reversed_channels" --backend "$p:chunk_comba_reads_k" --backend "$p:chunk_dplr_decayed_read"
  # Gated DeltaProduct (docs/spec/py-backend.md#fla-delta-product): fla's naive reference and chunked kernel
  # (bf16, with and without the decay), n_h steps along time (`token_rows`); the two plants (one
  # Householder step dropped) must fail, so the step reads as not passed: judge it by fla-delta-product-gpu.json
  # (on the CPU the chunked kernel's backward fails dα at the saturated-gates edge, fla's dg residue)
  g="py:$ours/fla_gated_delta_product.py" gp="py:$ours/fla_gated_delta_product_planted.py"
  NLC_KERNEL_CONFIGS=first run fla-delta-product bun conformance/cli.ts --filter C5/py- --report "$out/fla-delta-product-gpu.json" \
    --backend "$g:naive_recurrent_gated_delta_product" --backend "$g:chunk_gated_delta_product" --backend "$g:chunk_gated_delta_product_no_gate" \
    --backend "$gp:naive_step_dropped" --backend "$gp:chunk_step_dropped"
  # the linear-attention family (docs/spec/py-backend.md#fla-linear-attention): simple GLA (per token and
  # per head), GLA, linear attention, RWKV-6, recurrent and chunked; the f32 chunked ones also declared
  # TF32 (fla_tf32.py). Expected not to pass: the plants, fused_recurrent_rwkv6's backward (dht dropped),
  # chunk_simple_gla_gamma's forward (NaN final state), and on compute capability 8+ the f32 chunked ones
  l="py:$ours/fla_linear_attention.py" lp="py:$ours/fla_linear_attention_planted.py"
  NLC_KERNEL_CONFIGS=first run fla-linear-attention bun conformance/cli.ts --filter C5/py- --report "$out/fla-linear-attention-gpu.json" \
    --backend "$l:fused_recurrent_simple_gla" --backend "$l:chunk_simple_gla" --backend "$l:fused_recurrent_simple_gla_gamma" \
    --backend "$l:chunk_simple_gla_gamma" --backend "$l:fused_recurrent_gla" --backend "$l:chunk_gla" \
    --backend "$l:fused_recurrent_linear_attn" --backend "$l:chunk_linear_attn" --backend "$l:fused_recurrent_rwkv6" --backend "$l:chunk_rwkv6" \
    --backend "$t:chunk_simple_gla_tf32" --backend "$t:chunk_gla_tf32" --backend "$t:chunk_linear_attn_tf32" --backend "$t:chunk_rwkv6_tf32" \
    --backend "$lp:simple_gla_decay_late" --backend "$lp:gla_reversed_channels" --backend "$lp:linear_attn_state_transposed" \
    --backend "$lp:rwkv6_bonus_reversed" --backend "$lp:chunk_rwkv6_bonus_reversed" --backend "$lp:chunk_gla_reversed_channels"
fi
has default && run default bun conformance/cli.ts --report "$out/default.json"
printf '\n== [%4d s] done: %d step(s) did not pass\n' $((SECONDS - t0)) "$bad"
exit "$bad"
