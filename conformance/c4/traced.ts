/**
 * C4 — traced vs untraced forward (docs/spec/conformance.md#c4): the model's loss, level outputs
 * and final context are bitwise identical with the tape recording and without, in f64 and f32.
 */
import { bitwiseEqual } from "../../oracle/compare.ts";
import type { CaseOutcome, CheckDef, ProfileRuns } from "../../harness/check.ts";
import { modelForward } from "../../src/model/forward.ts";
import { tapeParams } from "../../src/model/step.ts";
import { maxAbs } from "../../src/numeric.ts";
import { withTape } from "../../src/tape.ts";
import { buildModelCase, type ModelCaseSpec } from "../../cases/model-case.ts";
import {
  COMPOSITIONS, FIXED, KS, LEARNED, SIZES, compositionId, compositionSubject, mixedRules, patterns, specArb, targets,
  type Composition, type Pattern,
} from "../../cases/model-arb.ts";

const RUNS_C4: ProfileRuns = { quick: 1, default: 2, deep: 20 };
const TOLERANCE = { kind: "bitwise", dtypes: ["f64", "f32"], compared: "loss, level outputs, final context" };
const TOLERANCE_MAC = { ...TOLERANCE, compared: "loss, level outputs (write and read stage), final context" };
const SPEC_C4: Record<Composition, string> = {
  mag: "docs/spec/conformance.md#c4; docs/spec/tape.md#must-hold (opt-in recording, same bits); docs/spec/titans-family.md#mag-forward, docs/spec/titans-family.md#cms-context",
  mac: "docs/spec/conformance.md#c4; docs/spec/tape.md#must-hold (opt-in recording, same bits); docs/spec/composition.md#mac-forward, docs/spec/titans-family.md#cms-context",
  mal: "docs/spec/conformance.md#c4; docs/spec/tape.md#must-hold (opt-in recording, same bits); docs/spec/composition.md#mal-forward, docs/spec/titans-family.md#cms-context",
};

/** The largest |value| over a forward's compared tensors (NaN counts as infinite). */
function largest(ts: readonly ArrayLike<number>[]): number {
  let m = 0;
  for (const t of ts) for (let i = 0; i < t.length; i++) m = Math.max(m, Number.isNaN(t[i]!) ? Infinity : Math.abs(t[i]!));
  return m;
}

/**
 * One case in f64, then f32. Traced and untraced are two runs of one computation, so NaN at the
 * same index is agreement; a forward that is not finite compares nothing there and the case is
 * discarded as vacuous, never passed (a divergent inner loop the generator drew; docs/spec/decisions.md#c4-range).
 */
export function c4Case(spec: ModelCaseSpec, p: Pattern): CaseOutcome {
  let f64Largest = 0;
  for (const dtype of ["f64", "f32"] as const) {
    const c = buildModelCase(spec, dtype);
    const plain = modelForward(c.model, c.params, c.batch, p.active, c.context);
    const { out: traced, entries } = withTape((tape) => {
      const out = modelForward(c.model, tapeParams(tape, c.params), c.batch, p.active, c.context);
      return { out, entries: tape.length };
    });
    // SWA and every level are opaque blocks, plus at least the embedding and the loss.
    if (entries < c.model.k + 3) return { ok: false, message: `${dtype}: the traced forward recorded only ${entries} tape entries` };
    const diffs: string[] = [];
    const compared: ArrayLike<number>[] = [];
    const cmp = (what: string, x: ArrayLike<number>, y: ArrayLike<number>) => {
      compared.push(y);
      const i = bitwiseEqual(x, y, true);
      if (i !== -1) diffs.push(`${what}[${i}]: traced ${x[i]}, untraced ${y[i]}`);
    };
    cmp("loss", traced.loss.data, plain.loss.data);
    plain.levelOutputs.forEach((y, l) => cmp(`y_${l}`, traced.levelOutputs[l]!.data, y.data));
    plain.readOutputs?.forEach((h, l) => cmp(`h_${l}`, traced.readOutputs![l]!.data, h.data));
    plain.context.forEach((ctx, l) => {
      for (const [n, t] of Object.entries(ctx)) cmp(`context ${l} ${n}`, traced.context[l]![n]!.data, t.data);
    });
    if (diffs.length > 0) return { ok: false, message: `${dtype}: ${diffs.slice(0, 3).join("; ")}` };
    const big = largest(compared);
    if (!Number.isFinite(big)) {
      const reach = dtype === "f32" && Number.isFinite(f64Largest) ? `; the f64 forward of the case reaches ${f64Largest.toExponential(2)}` : "";
      return {
        ok: false, vacuous: true,
        message: `${dtype}: the forward is not finite (loss ${plain.loss.data[0]}), traced and untraced alike${reach}: a case outside ${dtype}'s range compares nothing`,
      };
    }
    if (dtype === "f64") f64Largest = big;
    const flat = plain.levelOutputs.findIndex((y) => maxAbs(y.data) === 0);
    if (flat !== -1) return { ok: false, vacuous: true, message: `${dtype}: level ${flat}'s output is all zero, the comparison proves little` };
  }
  return { ok: true };
}

export function c4Checks(): CheckDef[] {
  const checks: CheckDef[] = [];
  for (const comp of COMPOSITIONS) {
    const tolerance = comp === "mac" ? TOLERANCE_MAC : TOLERANCE;
    for (const t of targets()) {
      for (const k of t.key === "mixed" ? KS.filter((k) => k > 1) : KS) {
        for (const p of patterns(k)) {
          checks.push({
            kind: "property", id: `C4/${compositionId(comp)}${t.key}/k${k}/${p.name}`, class: "C4",
            subject: { ...t.subject(k, p), ...compositionSubject(comp), dtype: "f64+f32" }, spec: SPEC_C4[comp],
            tolerance, runs: RUNS_C4, arb: specArb(t.rules(k), SIZES, FIXED, "random", comp), run: (s: ModelCaseSpec) => c4Case(s, p),
          });
        }
      }
    }
    // The learned gate's extra ops (mean, sigmoid, straight-through multipliers) under C4 too.
    for (const k of KS.filter((k) => k > 1)) {
      const p = patterns(k)[0]!;
      checks.push({
        kind: "property", id: `C4/${compositionId(comp)}mixed/k${k}/learned`, class: "C4", subject: { rule: "mixed", k, levels: "learned", ...compositionSubject(comp), dtype: "f64+f32" },
        spec: `docs/spec/conformance.md#c4; docs/spec/tape.md#must-hold; docs/spec/titans-family.md#learned-gate; docs/spec/decisions.md#d10${comp === "mag" ? "" : "; docs/spec/composition.md#gate-and-buffers"}`,
        tolerance, runs: RUNS_C4, arb: specArb(mixedRules(k), SIZES, LEARNED, "random", comp), run: (s: ModelCaseSpec) => c4Case(s, p),
      });
    }
  }
  return checks;
}
