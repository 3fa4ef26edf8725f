/**
 * Measures the bias statistic (oracle/bias.ts) on correct low-precision runs and on planted scale
 * errors, to choose and re-check BIAS_K and BIAS_FLOOR (docs/spec/precision.md#bias-calibration).
 *
 *   node_modules/.bin/bun bench/bias-calibration.ts [--cases N] [--seed S] [--rules delta,titans] [--large]
 *
 * For every rule variant and precision it runs N generated kernel-level cases; the "kernel" is the
 * plain-precision reference with every sum taken in reverse order (a second correct kernel of that
 * precision, rounding differently from the plain reference it is judged against) and the same run
 * with one gradient scaled by 1 + 1/100 (a planted bias). Prints, per precision, the largest |slope|/σ and
 * |slope| of the correct runs, how often the planted scale passes the flash-attention bound, and
 * how often the bias test catches it.
 */
import { parseArgs } from "node:util";
import { innerCase, sampleRuleCaseSpecs } from "../cases/inner-case.ts";
import { biasStat, biasVerdict } from "../oracle/bias.ts";
import { flashRule } from "../oracle/compare.ts";
import type { SeqTensors } from "../oracle/kernel-case.ts";
import { referenceRun } from "../oracle/kernel-reference.ts";
import { roundCase, runPlain } from "../oracle/plain-reference.ts";
import { maxAbs } from "../src/numeric.ts";
import type { Precision } from "../src/precision.ts";
import { MEMORY_RULES, ruleByKey } from "../src/rules/index.ts";

const { values: a } = parseArgs({
  options: {
    cases: { type: "string", default: "200" }, seed: { type: "string", default: "7" }, rules: { type: "string" },
    large: { type: "boolean", default: false },
  },
});
const N = Number(a.cases), SEED = Number(a.seed);
const rules = a.rules ? a.rules.split(",") : [...MEMORY_RULES];

/** --large: kernel-like sizes, where the plain reference's noise grows and the flash bound loosens. */
const SIZES = a.large ? { d: [32, 64] as [number, number], seq_len: [32, 64] as [number, number] } : { d: [4, 16] as [number, number], seq_len: [4, 12] as [number, number] };

const PRECISIONS: Record<string, Precision> = {
  "f32/f32/acc-f32": { storage: "f32", state: "f32", accumulate: "f32" },
  "bf16/f32/acc-f32": { storage: "bf16", state: "f32", accumulate: "f32" },
  "f16/f32/acc-f32": { storage: "f16", state: "f32", accumulate: "f32" },
};
const PLANT = 1 + 1 / 100;

function tensors(r: SeqTensors): Record<string, Float64Array> {
  const out: Record<string, Float64Array> = r.y === undefined ? {} : { y: Float64Array.from(r.y) };
  for (const [n, t] of Object.entries(r.state)) out[`final ${n}`] = Float64Array.from(t);
  for (const [n, t] of Object.entries(r.grads)) out[`d${n}`] = Float64Array.from(t);
  for (const [n, t] of Object.entries(r.dState0)) out[`dState0.${n}`] = Float64Array.from(t);
  return out;
}

interface Acc {
  z: number[]; slope: number[]; plantedFlashPass: number; plantedCaught: number; plantedMissed: number; planted: number;
  /** Correct tensors whose slope exceeded the dtype floor (the plain term or σ kept them passing). */
  overFloor: number; falseAlarms: number; compared: number;
  /** Per variant: the largest |slope| and where. */
  worst: Map<string, { slope: number; tensor: string; n: number; seed: number }>;
}

for (const [pname, p] of Object.entries(PRECISIONS)) {
  const acc: Acc = { z: [], slope: [], plantedFlashPass: 0, plantedCaught: 0, plantedMissed: 0, planted: 0, overFloor: 0, falseAlarms: 0, compared: 0, worst: new Map() };
  for (const key of rules) {
    const decl = ruleByKey(key)!;
    for (const frozen of decl.frozen === null ? [false] : [false, true]) {
      const specs = sampleRuleCaseSpecs(decl, SIZES, SEED, N);
      for (const spec of specs) {
        const c = innerCase(decl, frozen ? { ...spec, state: "random" } : spec, frozen);
        const rc = roundCase(c, p);
        const ref = tensors(referenceRun(decl, frozen, rc, c.cfg, "both")), plain = tensors(runPlain(decl, frozen, rc, c.cfg, p));
        const kernel = tensors(runPlain(decl, frozen, rc, c.cfg, p, "reversed"));
        for (const [n, r] of Object.entries(ref)) {
          const k = kernel[n]!, pl = plain[n]!;
          if (maxAbs(r) < 1e-6) continue;
          acc.compared++;
          const st = biasStat(k, r);
          if (Number.isFinite(st.sigma) && st.sigma > 0) acc.z.push(Math.abs(st.slope) / st.sigma);
          acc.slope.push(Math.abs(st.slope));
          const vk = frozen ? `${key}.frozen` : key, w = acc.worst.get(vk);
          if (w === undefined || Math.abs(st.slope) > w.slope) acc.worst.set(vk, { slope: Math.abs(st.slope), tensor: n, n: r.length, seed: spec.seed });
          const v = biasVerdict(k, r, pl, p.storage);
          if (Math.abs(v.slope) > v.floor) acc.overFloor++;
          if (!v.ok && ++acc.falseAlarms <= 5) {
            console.log(`  false alarm: ${frozen ? `${key}.frozen` : key} ${n} (${r.length} elements, seed ${spec.seed}): slope ${v.slope.toExponential(2)}, ` +
              `σ ${v.sigma.toExponential(2)}, 2‖plain−ref‖/‖ref‖ ${v.plainTerm.toExponential(2)}, floor ${v.floor.toExponential(2)}`);
          }
          if (n.startsWith("d")) {
            const planted = k.map((x) => x * PLANT);
            const floor = 1e-6 * maxAbs(r);
            acc.planted++;
            const flashOk = flashRule(planted, r, pl, floor).ok, biasOk = biasVerdict(planted, r, pl, p.storage).ok;
            if (flashOk) acc.plantedFlashPass++;
            if (!biasOk) acc.plantedCaught++;
            if (flashOk && biasOk && ++acc.plantedMissed <= 3) {
              const v = biasVerdict(planted, r, pl, p.storage);
              console.log(`  planted scale missed: ${frozen ? `${key}.frozen` : key} ${n} (${r.length} elements, seed ${spec.seed}): slope ${v.slope.toExponential(2)}, ` +
                `σ ${v.sigma.toExponential(2)}, 2‖plain−ref‖/‖ref‖ ${v.plainTerm.toExponential(2)}`);
            }
          }
        }
      }
    }
  }
  const q = (xs: number[], f: number) => [...xs].sort((x, y) => x - y)[Math.min(xs.length - 1, Math.floor(f * xs.length))] ?? NaN;
  console.log(`${pname}: ${acc.compared} tensors; |slope|/σ p50 ${q(acc.z, 0.5).toFixed(2)} p99 ${q(acc.z, 0.99).toFixed(2)} max ${q(acc.z, 1).toFixed(2)}; ` +
    `|slope| p99 ${q(acc.slope, 0.99).toExponential(2)} max ${q(acc.slope, 1).toExponential(2)}; above the floor ${acc.overFloor}, false alarms ${acc.falseAlarms}; ` +
    `planted x${PLANT}: flash passes ${acc.plantedFlashPass}/${acc.planted}, bias catches ${acc.plantedCaught}/${acc.planted}, both miss ${acc.plantedMissed}`);
  for (const [vk, w] of acc.worst) console.log(`  ${vk.padEnd(16)} max |slope| ${w.slope.toExponential(2)} (${w.tensor}, ${w.n} elements, seed ${w.seed})`);
}
