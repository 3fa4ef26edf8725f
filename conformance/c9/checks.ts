/**
 * C9 — cross-implementation (docs/spec/conformance.md#c9, docs/spec/decisions.md#d19): the
 * TypeScript reference vs the independent PyTorch reference (python/nlc_torch: forwards written
 * separately, gradients by autograd), both in f64, for every rule variant and for MAG + CMS model
 * cases (k = 1, 2, 4; frozen levels; the learned gate; mixed levels).
 *
 * The bridge is one Python process for the whole run: the first C9 check runs every case of the
 * run once (cross-check.ts in a child process, seed derived from the run seed) and later checks
 * read its results. Skipped, with the reason, when python3 or torch is missing. A rule the torch
 * side does not know (or fails on) errors its own checks only, with the cross-check's message.
 */
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { runsFor, type CheckDef, type DelegatedResult, type DelegateOptions, type Handover, type Profile, type ProfileRuns } from "../../harness/check.ts";
import { probeTorchSync } from "../../oracle/torch-bridge.ts";
import { noteSignal } from "../../harness/interrupt.ts";
import { ROOT } from "../../paths.ts";
import { variants, vkey } from "../../cases/rule-variant.ts";
import { modelCases, parseArgs } from "./cross-check.ts";
import { allowance, ORDER_FACTOR, SPREAD_CAP, worst as worstOf } from "./compare.ts";
import type { Selection } from "./options.ts";
import { levelPatternOf } from "../../cases/model-arb.ts";
import { C9 } from "../../oracle/precision-table.ts";

/** Rule cases per variant (random specs; pinned hyperparameters and edge cases come on top). */
const CASES: ProfileRuns = { quick: 2, default: 6, deep: 40 };
/**
 * max|torch − ts| / max(max|ts|, 1e-3 · the largest max|ts| of the tensor's group). Measured on
 * correct implementations: at most ~1.2e-14 over all rules and model cases (the two sum in
 * different orders); 1e-10 leaves four orders of margin and is still far below any modelling error.
 */
const TOL = C9.tolerance.value;
const TOLERANCE = {
  kind: "cross-implementation", rel: TOL, floor: "1e-3 of the largest tensor of the same group",
  reason: "two f64 implementations summing in different orders agree to ~1e-14; 1e-10 leaves margin",
  ill_conditioned: `a rule case's tensor that rounding alone moves by s (the TypeScript reference summed in reverse order) is allowed ` +
    `max(${TOL}, min(${ORDER_FACTOR}·s, ${SPREAD_CAP})) and is listed in details.ill_conditioned (docs/spec/conformance.md#c9-conditioning)`,
};

interface Diff { name: string; rel: number | string; abs: number | string; refMax: number; spread?: number }
/** A variant's results, or `error`: why the torch side could not run it (it does not know the rule, or failed on it). */
type RuleEntry = { cases: number; error: string } | { cases: number; error?: undefined; y: Diff | null; state: Diff | null; grads: Diff | null; refMax: number; stateFd?: string; illConditioned?: string[] };
type ModelEntry = { id: string; error: string } | { id: string; error?: undefined; worst: Diff | null; activeMatch: boolean; tapeWorst: Diff | null };
interface FixturesEntry { replayed: number; skipped: number; worst: Diff | null; failed: string[] }
interface CrossReport { torch: string; rules?: Record<string, RuleEntry>; model?: ModelEntry[]; fixtures?: FixturesEntry }

const modelId = (id: string) => `C9/model/${id.replace(/\//g, "+").replace(/\s+/g, "-")}`;
const FIXTURES_ID = "C9/fixtures";

let skipReason: string | null | undefined;
/** Why C9 cannot run here (python3 or torch missing), or null. Probed once. */
export function c9SkipReason(): string | null {
  if (skipReason === undefined) {
    const p = probeTorchSync();
    skipReason = p.available ? null : `the PyTorch reference is not available: ${p.reason}`;
  }
  return skipReason;
}

/**
 * Takes the probe's answer from the thread that started this one (conformance/delegate-worker.ts):
 * each probe starts Python and imports torch (about a CPU second), and one run needs one answer.
 */
export function adoptC9SkipReason(reason: string | null): void {
  skipReason = reason;
}

/**
 * Whether C9 can run here, as a worker thread adopts it from the thread that started it
 * (conformance/catalogue.ts): learnt once, before the workers start, when every worker runs C9 (a sweep).
 */
export const c9Handover: Handover = {
  take: () => skipReason,
  adopt: (v) => adoptC9SkipReason(v as string | null),
  prepare: (defs) => {
    if (defs.some((d) => d.class === "C9")) c9SkipReason();
  },
};

/** A run's cross-check: its report, why it could not run, or that C9 cannot run here at all (a skip, with the reason). */
type CrossOutcome = CrossReport | Error | { skip: string };
const results = new Map<string, CrossOutcome>();
/** The whole cross-check's wall limit (a starved machine is slow, not hung). */
const CROSS_CHECK_LIMIT_MS = 1_800_000;

/**
 * Runs every C9 case once per seed and profile (one bridge process), then serves the checks. No
 * probe comes first: the cross-check exits 2 when its bridge cannot start for want of python or
 * torch, and only then is the interpreter probed, for the reason the skips carry.
 */
function crossReport(runSeed: number, profile: Profile, selected: ReadonlySet<string>): CrossReport | { skip: string } {
  // Only what this run selected is cross-checked (a filtered run, a replay); each case is the one a
  // whole run draws, so its verdict is the same.
  const selection: Selection = {
    rules: variants().map(vkey).filter((k) => selected.has(`C9/${k}`)),
    model: modelCases(parseArgs([])).map((d) => d.id).filter((id) => selected.has(modelId(id))),
    fixtures: selected.has(FIXTURES_ID),
  };
  const key = `${runSeed}:${profile}:${JSON.stringify(selection)}`;
  let r = results.get(key);
  if (r === undefined) {
    const dir = mkdtempSync(join(tmpdir(), "nlc-c9-"));
    const out = join(dir, "cross.json"), sel = join(dir, "select.json");
    writeFileSync(sel, JSON.stringify(selection));
    // A hang is caught inside by the bridge's own limits (60 s a request, the start tried twice);
    // this only bounds the whole run, which took over 600 s on a machine at load 15 (sweep seeds 59, 60).
    const p = spawnSync(process.execPath, [join(import.meta.dir, "cross-check.ts"), "--seed", String(runSeed), "--cases", String(runsFor(CASES, profile)), "--tol", String(TOL), "--json", out, "--select", sel],
      { cwd: ROOT, encoding: "utf8", timeout: CROSS_CHECK_LIMIT_MS, maxBuffer: 64 << 20 });
    noteSignal(p.signal); // the cross-check ended by SIGINT/SIGTERM: the run was interrupted
    try {
      if (p.error !== undefined) r = new Error(`the cross-check could not run: ${p.error.message}`);
      else if (p.status === 2 && /the torch bridge is not available/.test(p.stderr ?? "")) {
        const reason = c9SkipReason();
        r = reason !== null ? { skip: reason } : new Error(`the cross-check could not start its bridge: ${(p.stderr ?? "").trim().slice(-800)}`);
      } else if (p.status !== 0 && p.status !== 1) r = new Error(`the cross-check exited with ${p.status ?? p.signal}: ${(p.stderr || p.stdout).slice(-800)}`);
      else r = JSON.parse(readFileSync(out, "utf8")) as CrossReport;
    } catch (e) {
      r = new Error(`the cross-check wrote no report: ${e instanceof Error ? e.message : String(e)}; ${(p.stderr ?? "").slice(-400)}`);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    results.set(key, r);
  }
  if (r instanceof Error) throw r;
  return r;
}

const num = (x: number | string): number => (typeof x === "number" ? x : Number(x));

/** A C9 check's verdict on the compared tensors of its cases (the worst over its own allowance), exported for tests/c9-conditioning.test.ts. */
export function c9Verdict(diffs: readonly (Diff | null)[], refMax: number, seed: number, runs: number, extra: string | null, ill?: readonly string[]): DelegatedResult {
  // the tensor furthest over its own allowance (an ill-conditioned one is allowed more: compare.ts)
  const worst = worstOf(diffs.filter((d): d is Diff => d !== null).map((d) => ({ ...d, rel: num(d.rel), abs: num(d.abs) })), TOL);
  const w = worst === null ? undefined : { abs: num(worst.abs), rel: num(worst.rel), tensor: worst.name, index: -1 };
  const details = ill !== undefined && ill.length > 0 ? { details: { ill_conditioned: ill } } : {};
  if (worst === null || refMax === 0) return { status: "vacuous", runs, seed, path: "", message: "every compared tensor was zero" };
  const allowed = allowance(worst, TOL);
  if (!(num(worst.rel) <= allowed)) {
    const why = worst.spread === undefined ? `${TOL}` : `${allowed.toExponential(2)} (${ORDER_FACTOR} × its order spread ${worst.spread.toExponential(2)}, capped at ${SPREAD_CAP})`;
    return { status: "fail", runs, seed, path: "", worst: w, message: `${worst.name}: torch and TypeScript differ by ${num(worst.rel).toExponential(3)} (relative) > ${why}`, ...details };
  }
  if (extra !== null) return { status: "fail", runs, seed, path: "", worst: w, message: extra, ...details };
  return { status: "pass", runs, seed, path: "", worst: w, ...details };
}

export function c9Checks(): CheckDef[] {
  // A run without C9 never starts Python; a run with it starts the cross-check's bridge first and
  // probes only when that fails (or takes the answer a sweep's parent thread already has).
  const report = ({ seed, runSeed, profile, selected }: DelegateOptions): CrossReport | DelegatedResult => {
    if (typeof skipReason === "string") return { status: "skip", runs: 0, seed, path: "", message: skipReason };
    const r = crossReport(runSeed, profile, selected);
    return "skip" in r ? { status: "skip", runs: 0, seed, path: "", message: r.skip } : r;
  };
  /** A delegate that reads the run's cross-check report (a skip or the report's absence answered for it). */
  const fromReport = (judge: (cr: CrossReport, seed: number) => DelegatedResult) => (opts: DelegateOptions): DelegatedResult => {
    const cr = report(opts);
    return "status" in cr ? cr : judge(cr, opts.seed);
  };
  // every C9 check reads the one cross-check process's report: they share its batch
  const base = (id: string, subject: CheckDef["subject"], spec: string) => ({ id, class: "C9" as const, subject, spec, tolerance: TOLERANCE, needs: { child: "C9" } });
  const checks: CheckDef[] = [];
  for (const v of variants()) {
    const b = base(`C9/${vkey(v)}`, { rule: v.decl.key, frozen: v.frozen, dtype: "f64" }, `docs/spec/conformance.md#c9; docs/spec/decisions.md#d19; ${v.decl.sheet}`);
    checks.push({
      ...b, kind: "delegated",
      delegate: fromReport((cr, seed) => {
        const e = cr.rules?.[vkey(v)];
        if (e === undefined) return { status: "error", runs: 0, seed, path: "", message: `the cross-check has no result for ${vkey(v)}` };
        if (e.error !== undefined) return { status: "error", runs: e.cases, seed, path: "", message: e.error };
        const fd = e.stateFd === undefined || e.stateFd === "-" ? null : /(\d+)\/(\d+)$/.exec(e.stateFd);
        const fdBad = fd !== null && fd[1] !== fd[2] ? `torch's initial-state gradient disagrees with finite differences of the TypeScript forward (${e.stateFd})` : null;
        return c9Verdict([e.y, e.state, e.grads], e.refMax, seed, e.cases, fdBad, e.illConditioned);
      }),
    });
  }
  for (const def of modelCases(parseArgs([]))) {
    const pattern = def.spec.pattern ?? "mag";
    const rule = def.id.split(" ")[pattern === "mag" ? 0 : 1]!;
    const k = def.spec.levels.length;
    // The case's pattern: the learned gate when it decides, else the pulse's mask by name.
    const levels = def.spec.freq.kind === "learned" ? "learned" : levelPatternOf(def.pulse);
    const b = base(modelId(def.id), { rule: rule === "mixed" ? "mixed" : rule, k, ...(levels ? { levels } : {}), ...(pattern === "mag" ? {} : { pattern }), dtype: "f64" },
      `docs/spec/conformance.md#c9; docs/spec/decisions.md#d19; ${pattern === "mag" ? "docs/spec/titans-family.md#mag" : `docs/spec/composition.md#${pattern}`}, docs/spec/titans-family.md#cms`);
    checks.push({
      ...b, kind: "delegated",
      delegate: fromReport((cr, seed) => {
        const e = cr.model?.find((m) => m.id === def.id);
        if (e === undefined) return { status: "error", runs: 0, seed, path: "", message: `the cross-check has no result for '${def.id}'` };
        if (e.error !== undefined) return { status: "error", runs: 0, seed, path: "", message: e.error };
        return c9Verdict([e.worst, e.tapeWorst], Math.max(e.worst?.refMax ?? 0, e.tapeWorst?.refMax ?? 0), seed, 1, e.activeMatch ? null : "the two implementations chose different active levels");
      }),
    });
  }
  // Every golden fixture replayed through torch: a fixture regenerated from a wrong forward
  // disagrees with torch even when it agrees with itself (docs/spec/conformance.md#c9).
  checks.push({
    ...base(FIXTURES_ID, { fixture: "fixtures/golden", dtype: "f64" }, "docs/spec/conformance.md#c9; docs/spec/fixtures.md"), kind: "delegated",
    delegate: fromReport((cr, seed) => {
      const f = cr.fixtures;
      if (f === undefined) return { status: "error", runs: 0, seed, path: "", message: "the cross-check has no result for the golden fixtures" };
      if (f.failed.length > 0) return { status: "fail", runs: f.replayed, seed, path: "", message: `${f.failed.length} golden fixture(s) disagree with torch: ${f.failed.slice(0, 3).join("; ")}`, details: { failed: f.failed } };
      if (f.replayed === 0) return { status: "vacuous", runs: 0, seed, path: "", message: "no f64 golden fixture was replayed" };
      return c9Verdict([f.worst], f.worst?.refMax ?? 0, seed, f.replayed, null);
    }),
  });
  return checks;
}
