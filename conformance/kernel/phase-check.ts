/**
 * The definition of a kernel check over generated batches, for every kind of backend
 * (docs/spec/conformance.md#c5, #regime): under the regime profile one batch of every shape regime
 * per case, run up to the first that fails; else the declared boundary case and its enumerated
 * values first, the generated batches, then the declared guard case (d = 5,
 * docs/spec/hazards.md#odd-key) and the kind's own declared cases on top. What differs by kind is its
 * route, passed in: the case form, how one case runs (at once, or later) and is described, its own
 * declared cases.
 */
import type { AsyncPropertyCheck, CaseOutcome, CheckBase, Profile, PropertyCheck } from "../../harness/check.ts";
import {
  boundaryExample, caseArb, caseRegimes, oddKeyExample, regimeArb, withEnumExamples, type CaseForm, type CaseOf, type Runs,
} from "../../cases/kernel-batch.ts";
import { regimeOutcome, withRegimesNotJudged } from "../../cases/kernel-regimes.ts";
import { then, type Maybe } from "../../cases/maybe.ts";
import type { RuleEntry } from "./plan.ts";

/** How a kind's cases of one check run. */
export interface PhaseRoute<F extends CaseForm> {
  readonly form: F;
  /** Whether its cases answer at once (a native library) or later (a kernel in another process). */
  readonly answers: "now" | "later";
  /** The chunk sizes the cases' boundaries are set by (the declared ones, else the defaults). */
  readonly chunks: readonly number[];
  /** The kernel takes packed batches: a packed batch among the regimes. */
  readonly packed?: boolean;
  one(k: CaseOf<F>): Maybe<CaseOutcome>;
  describe(k: CaseOf<F>): string;
  /** The chunk size a regime's report names for a case. */
  chunkOf(k: CaseOf<F>): number;
  /** The kind's declared cases: after the boundary and enumerated cases (not counted on top of the runs), and after the guard case (counted). */
  readonly declared?: { readonly beforeGuard?: readonly CaseOf<F>[]; readonly afterGuard?: readonly CaseOf<F>[] };
}

/** Run counts with n fixed examples added on top (fast-check counts examples among numRuns). */
export function plus(runs: Runs, n: number): Runs {
  if (n === 0) return runs;
  return { quick: runs.quick + n, default: runs.default + n, deep: runs.deep + n, ...(runs.regime !== undefined ? { regime: runs.regime + n } : {}) };
}

/** The check's cases in order up to the first that fails: the verdicts so far, at once or later. */
function untilFailure<K>(ks: readonly K[], run: (k: K) => Maybe<CaseOutcome>): Maybe<CaseOutcome[]> {
  const outs: CaseOutcome[] = [];
  const from = (i: number): Maybe<CaseOutcome[]> => (i >= ks.length ? outs : then(run(ks[i]!), (o) => {
    outs.push(o);
    return !o.ok && o.vacuous !== true ? outs : from(i + 1);
  }));
  return from(0);
}

/**
 * The check of entry `e` over the route's cases; `regimes`: the regime profile runs its regimes
 * (forward and backward; the other checks of a library run the profile's generated cases).
 */
export function phaseCheck<F extends CaseForm>(e: RuleEntry, base: CheckBase, route: PhaseRoute<F>, profile: Profile, regimes = true): PropertyCheck<any> | AsyncPropertyCheck<any> {
  const { decl, frozen, runs } = e;
  const kind = route.answers === "now" ? "property" as const : "async-property" as const;
  const C = Math.min(...route.chunks);
  if (regimes && profile === "regime") {
    const order = caseRegimes(route.packed === true, decl);
    const shapeOf = (k: CaseOf<F>, i: number) => {
      const regime = order[i]!;
      return regime === "packed" ? { lengths: k.lengths!, H: k.H, d: k.base.d, C } : { regime, B: k.B, T: k.base.seq_len, H: k.H, d: k.base.d, C: route.chunkOf(k) };
    };
    return {
      ...base, kind, runs, arb: regimeArb(decl, frozen, route.chunks, route.form, route.packed === true),
      describe: (ks: CaseOf<F>[]) => ks.map((k) => route.describe(k)).join("; "),
      // the regimes in order, up to the first that fails (shrinking then pays for the regimes before it only)
      run: (ks: CaseOf<F>[]) => then(untilFailure(ks, (k) => route.one(k)), (outs) => withRegimesNotJudged(regimeOutcome(outs, ks.map(shapeOf)), decl)),
    } as PropertyCheck<any> | AsyncPropertyCheck<any>;
  }
  // every value of an enumerated hyperparameter as an example of its own, on top of the generated
  // cases (docs/spec/conformance.md#enum-examples); the declared guard case and the kind's own come
  // last and on top, so the generated cases stay the same cases as before
  const [boundary, ...enums] = withEnumExamples(decl, frozen, boundaryExample(decl, frozen, C, route.form));
  const after = route.declared?.afterGuard ?? [];
  const examples = [boundary!, ...enums, ...(route.declared?.beforeGuard ?? []), oddKeyExample(decl, frozen, C, route.form), ...after];
  return {
    ...base, kind, runs: plus({ ...runs, regime: runs.default }, enums.length + 1 + after.length), arb: caseArb(decl, frozen, profile, route.form),
    examples, describe: (k: CaseOf<F>) => route.describe(k), run: (k: CaseOf<F>) => route.one(k),
  } as PropertyCheck<any> | AsyncPropertyCheck<any>;
}
