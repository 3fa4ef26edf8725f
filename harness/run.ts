/**
 * Runs checks with fast-check: every failure is shrunk, and the result names the seed and the
 * path that replay exactly the (shrunk) failing case.
 */
import * as fc from "fast-check";
import { emptyWorst, type Worst } from "../oracle/compare.ts";
import { runsFor, SubjectBroken, type AsyncPropertyCheck, type CaseOutcome, type CheckDef, type CheckResult, type Profile, type PropertyCheck } from "./check.ts";
import { checkSeed, replayArgsOf, replayCommand } from "./replay-command.ts";
import { then, type Maybe } from "../cases/maybe.ts";

export interface RunOptions {
  /** The run's seed; each check derives its own from it and its id, so filtering changes nothing. */
  readonly seed: number;
  readonly profile: Profile;
  /** Replay: the check's own seed and the fast-check path of one case. */
  readonly replay?: { seed: number; path: string; dump?: string };
  /** Ids of every check selected in this run (for delegates that batch their siblings). */
  readonly selected?: ReadonlySet<string>;
  /** Called with every case a property check generates here, before it runs (a sweep's digest of its cases). */
  readonly onCase?: (checkId: string, input: unknown) => void;
}

/** Discarded (near-zero) cases fast-check accepts per requested case before it gives up on a run. */
const MAX_SKIPS_PER_RUN = 2;

/**
 * Cases a property run asks for: the profile's count, or one under a replay of a case's path. A
 * replay with an empty path (the replay line of a pass or a vacuous verdict) re-runs the whole
 * property at the check's seed, so it reproduces that verdict.
 */
function runsOf(profileRuns: number, replay: RunOptions["replay"]): number {
  return replay !== undefined && replay.path !== "" ? 1 : profileRuns;
}

/** A case's comparison failed (as opposed to a check that threw). */
class CaseFailed extends Error {}

type Verdict = Pick<CheckResult, "status" | "runs" | "path" | "worst" | "message" | "details">;

/**
 * What a property check keeps across its cases, and the verdict of its fast-check run — one
 * definition for every property check (runCheck). A case whose comparison
 * is over near-zero values proves nothing: it is discarded (as a fast-check precondition) and
 * counted, and the check is vacuous when such cases are the majority.
 */
class CaseTally {
  private worst: Worst = emptyWorst();
  // the measurements of the case with the worst error (a failure reports the shrunk case's)
  private worstDetails: CaseOutcome["details"];
  private informative = 0;
  private discarded = 0;
  private lastVacuous = "";

  /** Inside the property: counts one case; a vacuous one is discarded, a failing one throws CaseFailed. */
  record(out: CaseOutcome): void {
    if (out.vacuous) {
      this.discarded++;
      this.lastVacuous = out.message ?? "vacuous comparison";
      fc.pre(false);
    }
    this.informative++;
    if (out.worst !== undefined && out.worst.abs >= this.worst.abs) {
      this.worst = out.worst;
      this.worstDetails = out.details;
    }
    if (!out.ok) throw new CaseFailed(out.message ?? "check failed");
  }

  /**
   * The verdict of a run without a counterexample to report (pass or vacuous), or null. A run
   * fast-check gave up on (more than MAX_SKIPS_PER_RUN discarded cases per requested one) is
   * vacuous and says so, with the counts (docs/spec/tolerances.md#vacuous).
   */
  settled<Ts>(details: fc.RunDetails<Ts>, numRuns: number): Verdict | null {
    const runs = details.numRuns;
    const discardNote = this.discarded > 0
      ? ` (${this.discarded} vacuous case${this.discarded === 1 ? "" : "s"} discarded; last: ${this.lastVacuous})` : "";
    const gaveUp = details.failed && details.counterexample === null && details.numSkips > 0;
    if (details.failed && !gaveUp) return null;
    if (gaveUp) {
      return {
        status: "vacuous", runs, path: "",
        message: `fast-check gave up: ${this.discarded} generated case${this.discarded === 1 ? " was" : "s were"} discarded as vacuous (at most ${MAX_SKIPS_PER_RUN} per requested case), ${this.informative} of ${numRuns} compared non-negligible values; last discarded: ${this.lastVacuous}`,
      };
    }
    if (this.informative < Math.ceil(numRuns / 2)) {
      return { status: "vacuous", runs, path: "", message: `only ${this.informative} of ${numRuns} cases compared non-negligible values${discardNote}` };
    }
    if (details.failed) return null;
    return {
      status: "pass", runs, path: "", worst: this.worst.index >= 0 ? this.worst : undefined, message: discardNote ? discardNote.trim() : undefined,
      ...(this.worstDetails ? { details: this.worstDetails } : {}),
    };
  }
}

/**
 * The verdict of a run with a counterexample: `fail` with the shrunk case's own worst error and
 * measurements (it is run once more for them), or `error` when the property threw something else.
 */
function counterexampleVerdict<Ts>(details: fc.RunDetails<Ts>, example: string, shrunk: CaseOutcome | undefined): Verdict {
  const path = details.counterexamplePath ?? "";
  const err = details.errorInstance;
  if (err instanceof CaseFailed) {
    return { status: "fail", runs: details.numRuns, path, worst: shrunk?.worst, message: `${err.message}${example}`, ...(shrunk?.details ? { details: shrunk.details } : {}) };
  }
  // fast-check names no error instance for some failures (it then gives its report as text)
  const what = err === undefined || err === null ? `fast-check reported a failure without an error (${details.numRuns} runs, ${details.numSkips} discarded)` : errText(err);
  return { status: "error", runs: details.numRuns, path, message: `${what}${example}` };
}

/**
 * Runs a check: one runner for every check, whether its cases answer at once (the catalogue's
 * checks; the result then comes at once) or later (a kernel in another process: AsyncPropertyCheck,
 * the result's promise). The same seeds, examples, shrinking, replay paths, vacuity rule and result.
 */
export function runCheck<T>(def: CheckDef<T>, opts: RunOptions): CheckResult;
export function runCheck<T>(def: AsyncPropertyCheck<T>, opts: RunOptions): Promise<CheckResult>;
export function runCheck<T>(def: CheckDef<T> | AsyncPropertyCheck<T>, opts: RunOptions): Maybe<CheckResult> {
  const seed = opts.replay?.seed ?? checkSeed(opts.seed, def.id);
  const base = { id: def.id, class: def.class, subject: def.subject, tolerance: def.tolerance, seed, spec: def.spec };
  const t0 = performance.now();
  const args = replayArgsOf(def, opts.profile);
  const done = (r: Omit<CheckResult, keyof typeof base | "ms" | "replay">): CheckResult => ({
    ...base, ...r, ms: Math.round((performance.now() - t0) * 1000) / 1000, replay: replayCommand(def.id, seed, r.path, args),
  });
  if (def.kind === "skipped") return done({ status: "skip", runs: 0, path: "", message: def.reason, ...(def.details !== undefined ? { details: def.details } : {}) });
  if (def.kind === "delegated") {
    try {
      const r = def.delegate({
        seed, runSeed: opts.seed, profile: opts.profile, replayPath: opts.replay?.path, ...(opts.replay?.dump !== undefined ? { replayDump: opts.replay.dump } : {}), selected: opts.selected ?? new Set([def.id]),
      });
      const res = done({ status: r.status, runs: r.runs, path: r.path, worst: r.worst, message: r.message, ...(r.details ? { details: r.details } : {}) });
      return { ...res, seed: r.seed, replay: replayCommand(def.id, r.seed, r.path, args), ms: r.ms ?? res.ms };
    } catch (e) {
      return done({ status: "error", runs: 0, path: "", message: errText(e) });
    }
  }

  if (def.kind === "single") {
    let out: CaseOutcome;
    try {
      out = def.run();
    } catch (e) {
      return done({ status: "error", runs: 1, path: "", message: errText(e) });
    }
    return done({ status: statusOf(out), runs: 1, path: "", worst: out.worst, message: out.message, ...(out.details ? { details: out.details } : {}) });
  }
  return then(runProperty<T>(def, seed, opts), done);
}

/** The verdict of a property check's fast-check run (runCheck's), at once or later as its cases answer. */
function runProperty<T>(def: PropertyCheck<T> | AsyncPropertyCheck<T>, seed: number, opts: RunOptions): Maybe<Verdict> {
  const run = def.run as (input: T) => Maybe<CaseOutcome>;
  const tally = new CaseTally();
  let calls = 0;
  // a case after which the subject cannot be called again: no more calls (shrinking ends at once)
  let broken: { error: SubjectBroken; input: T; index: number } | undefined;
  const predicate = (input: T): Maybe<void> => {
    if (broken !== undefined) return;
    opts.onCase?.(def.id, input);
    const index = calls++;
    const noteBroken = (e: unknown): never => {
      if (e instanceof SubjectBroken) broken = { error: e, input, index };
      throw e;
    };
    let out: Maybe<CaseOutcome>;
    try {
      out = run(input);
    } catch (e) {
      return noteBroken(e);
    }
    return out instanceof Promise ? out.then((o) => tally.record(o), noteBroken) : tally.record(out);
  };
  const numRuns = runsOf(runsFor(def.runs, opts.profile), opts.replay);
  const params = {
    seed,
    numRuns,
    ...(def.examples !== undefined ? { examples: def.examples.map((e) => [e] as [T]) } : {}),
    path: opts.replay?.path || undefined,
    endOnFailure: false,
    maxSkipsPerRun: MAX_SKIPS_PER_RUN,
  };
  const checked: Maybe<fc.RunDetails<[T]>> = def.kind === "async-property"
    ? fc.check(fc.asyncProperty(def.arb, predicate as (input: T) => Promise<void>), params)
    : fc.check(fc.property(def.arb, predicate as (input: T) => void), params);
  return then(checked, (details): Maybe<Verdict> => {
    if (broken !== undefined) {
      // the path of the case itself: a replay of run `index` (from the replayed path, if any)
      const path = opts.replay?.path ? opts.replay.path : String(broken.index);
      return { status: "error", runs: broken.index + 1, path, message: `case ${describeCase(def, broken.input)}: ${broken.error.message}` };
    }
    const settled = tally.settled(details, numRuns);
    if (settled !== null) return settled;
    const input = details.counterexample?.[0];
    const example = details.counterexample === null ? "" : ` — case ${describeCase(def, input as T)}`;
    // The worst error reported is the shrunk counterexample's own, so run it once more.
    const verdict = (shrunk: CaseOutcome | undefined) => counterexampleVerdict(details, example, shrunk);
    if (details.counterexample === null) return verdict(undefined);
    let again: Maybe<CaseOutcome>;
    try {
      again = run(input as T);
    } catch {
      return verdict(undefined);
    }
    return again instanceof Promise ? again.then(verdict, () => verdict(undefined)) : verdict(again);
  });
}

/** How a message names a case: the check's own description, else the case as JSON. */
function describeCase<T>(def: { describe?(input: T): string }, input: T): string {
  return def.describe?.(input) ?? caseText(input);
}

/**
 * A counterexample as a message shows it: JSON (fast-check's records have no prototype, which its
 * own printer writes as `{__proto__:null,...}`), with a non-finite or negative-zero number as a
 * string ("NaN", "-0"); fast-check's printer for what JSON cannot hold (a function, a cycle).
 */
export function caseText(value: unknown): string {
  try {
    const text = JSON.stringify(value, (_k, v: unknown) =>
      typeof v === "number" && (!Number.isFinite(v) || Object.is(v, -0)) ? (Object.is(v, -0) ? "-0" : String(v))
        : typeof v === "bigint" ? v.toString() : v);
    if (text !== undefined) return text;
  } catch {
    // a cycle
  }
  return fc.stringify(value);
}

function statusOf(out: CaseOutcome): CheckResult["status"] {
  if (out.vacuous) return "vacuous";
  return out.ok ? "pass" : "fail";
}

function errText(e: unknown): string {
  if (e instanceof Error) return `${e.message}`;
  return String(e);
}
