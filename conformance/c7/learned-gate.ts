/**
 * C7 — the learned frequency gate (docs/spec/titans-family.md#learned-gate, D10): the tape's
 * gradients equal the hand-written straight-through surrogate, and the surrogate has the true sign.
 * Under MAC and MAL (docs/spec/composition.md#gate-and-buffers) the gate is the same op on the same X and
 * the hand-written side is the same gateBackward, so there the check is the tape-vs-hand-written
 * comparison and the decisions; the sign is measured on MAG, whose tail is written out below.
 */
import { cmsForward, cmsStep } from "../../oracle/cms-backward.ts";
import { compareTensors, emptyWorst, TOL_FD, VACUITY_FACTOR, worse, type Worst } from "../../oracle/compare.ts";
import { compareSteps } from "../../oracle/model-compare.ts";
import { fromComparison, type CaseOutcome } from "../../harness/check.ts";
import { DEFAULT_FREQ_THRESHOLD, type Model } from "../../src/model/config.ts";
import type { ModelParams } from "../../src/model/params.ts";
import { tapeStep } from "../../src/model/step.ts";
import { add, crossEntropy, matmul, matmulTransposeB, mul, scale, sigmoid } from "../../src/ops/index.ts";
import { Tensor, type Data } from "../../src/tensor.ts";
import { buildModelCase, type ModelCase, type ModelCaseSpec } from "../../cases/model-case.ts";

/**
 * The learned gate (D10): the tape's gradients equal the hand-written surrogate, and the surrogate
 * has the true sign: db_freq_l / (g_l (1 − g_l)) equals the finite-difference derivative of the
 * loss w.r.t. a multiplier on level l's output (computed here from the level outputs, untraced).
 */
export function learnedGateCase(spec: ModelCaseSpec): CaseOutcome {
  let worst: Worst = emptyWorst();
  for (const sign of [1, -1]) {
    const r = learnedGateOnce(spec, sign);
    if (!r.ok) return r;
    if (r.worst !== undefined) worst = worse(worst, r.worst);
  }
  return { ok: true, worst };
}

function learnedGateOnce(spec: ModelCaseSpec, sign: number): CaseOutcome {
  const c = withGateBiases(buildModelCase(spec), sign);
  const pulse = c.model.levels.map(() => true);
  const got = tapeStep(c.model, c.params, c.batch, pulse, c.context);
  const want = cmsStep(c.model, c.params, c.batch, pulse, c.context);
  const cmp = compareSteps(c.model, got, want);
  if (!cmp.ok) return fromComparison(cmp);
  const k = c.model.k;
  const expected = c.model.levels.map((_, l) => l === 0 || (l < 3 ? (l === 1) === (sign > 0) : got.gates![l]! > DEFAULT_FREQ_THRESHOLD));
  if (got.active.join() !== expected.join()) return { ok: false, message: `gate decisions [${got.active}], expected [${expected}] from g = [${got.gates}]` };
  if (c.model.pattern !== "mag") return { ok: true, worst: cmp.worst };
  const cache = cmsForward(c.model, c.params, c.batch, pulse, c.context);
  const gates = got.gates!;
  const fd: Record<string, ArrayLike<number>> = {}, tape: Record<string, ArrayLike<number>> = {};
  for (let l = 0; l < k; l++) {
    const g = gates[l]!;
    const eps = 1e-6;
    const at = (m: number) => tailLoss(c.model, c.params, cache.A, cache.levels.map((lv) => lv.y), l, m, c.batch.targets);
    // dg_l is compared rather than db_freq_l = dg_l g_l (1 − g_l): a clearly-off level's g(1 − g) ~ 0.07 would shrink it.
    fd[`dg_${l}`] = [(at(1 + eps) - at(1 - eps)) / (2 * eps)];
    tape[`dg_${l}`] = [got.grads.levels[l]!.b_freq!.data[0]! / (g * (1 - g))];
  }
  // One level's <dSum, y_l> may cancel to ~1e-7 by chance: vacuous only when every level's does.
  const r = compareTensors(tape, fd, TOL_FD, 0);
  if (!r.ok) return fromComparison(r);
  const largest = Math.max(...Object.values(fd).map((v) => Math.abs(v[0]!)));
  if (largest < VACUITY_FACTOR * TOL_FD.atol) return { ok: false, vacuous: true, message: `every dg_l is below ${VACUITY_FACTOR * TOL_FD.atol}` };
  return { ok: true, worst: cmp.worst };
}

/** Levels 1 and 2 clearly on and off (swapped when sign < 0), level 3 wherever its random bias puts it. */
function withGateBiases(c: ModelCase, sign: number): ModelCase {
  const bias = [0, 2.5 * sign, -2.5 * sign];
  c.params.levels.forEach((rec, l) => {
    if (l > 0 && l < bias.length) rec.b_freq!.data[0] = bias[l]!;
  });
  return c;
}

/** The model's tail from A and the level outputs, with level l's output times m (untraced ops). */
function tailLoss(model: Model, params: ModelParams, A: Data, ys: readonly Tensor[], l: number, m: number,
  targets: readonly number[]): number {
  const dt = ys[0]!.dtype;
  const parts = ys.map((y, i) => (i === l ? scale([y], { c: m }) : y));
  let sum = parts[0]!;
  for (let i = 1; i < parts.length; i++) sum = add([sum, parts[i]!], {});
  const comb = model.combineScale === null ? sum : scale([sum], { c: model.combineScale });
  const At = new Tensor(dt, comb.shape, A);
  const O = mul([At, sigmoid([comb], {})], {});
  const Z = matmul([matmulTransposeB([O, params.model.W_o], {}), params.model.W_unembed], {});
  return crossEntropy([Z], { targets }).data[0]!;
}
