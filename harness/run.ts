/**
 * Runs checks with fast-check: every failure is shrunk, and the result names the seed and the
 * path that replay exactly the (shrunk) failing case.
 */
import * as fc from "fast-check";
import { emptyWorst, type Worst } from "../oracle/compare.ts";
import { runsFor, type CaseOutcome, type CheckDef, type CheckResult, type Profile } from "./check.ts";
import { checkSeed, replayArgsOf, replayCommand } from "./replay-command.ts";

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
 * definition for runCheck and the asynchronous runner of the Python kernel backends. A case whose comparison
 * is over near-zero values proves nothing: it is discarded (as a fast-check precondition) and
 * counted, and the check is vacuous when such cases are the majority.
 */
export class CaseTally {
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
export function counterexampleVerdict<Ts>(details: fc.RunDetails<Ts>, example: string, shrunk: CaseOutcome | undefined): Verdict {
  const path = details.counterexamplePath ?? "";
  const err = details.errorInstance;
  if (err instanceof CaseFailed) {
    return { status: "fail", runs: details.numRuns, path, worst: shrunk?.worst, message: `${err.message}${example}`, ...(shrunk?.details ? { details: shrunk.details } : {}) };
  }
  // fast-check names no error instance for some failures (it then gives its report as text)
  const what = err === undefined || err === null ? `fast-check reported a failure without an error (${details.numRuns} runs, ${details.numSkips} discarded)` : errText(err);
  return { status: "error", runs: details.numRuns, path, message: `${what}${example}` };
}

export function runCheck<T>(def: CheckDef<T>, opts: RunOptions): CheckResult {
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

  const tally = new CaseTally();
  const property = fc.property(def.arb, (input) => {
    opts.onCase?.(def.id, input);
    return tally.record(def.run(input));
  });
  const numRuns = runsOf(runsFor(def.runs, opts.profile), opts.replay);
  const details = fc.check(property, {
    seed,
    numRuns,
    ...(def.examples !== undefined ? { examples: def.examples.map((e) => [e] as [typeof e]) } : {}),
    path: opts.replay?.path || undefined,
    endOnFailure: false,
    maxSkipsPerRun: MAX_SKIPS_PER_RUN,
  });
  const settled = tally.settled(details, numRuns);
  if (settled !== null) return done(settled);
  const example = details.counterexample === null ? "" : ` — case ${def.describe?.(details.counterexample[0]) ?? caseText(details.counterexample[0])}`;
  // The worst error reported is the shrunk counterexample's own, so run it once more.
  let shrunk: CaseOutcome | undefined;
  try {
    if (details.counterexample !== null) shrunk = def.run(details.counterexample[0]);
  } catch {
    shrunk = undefined;
  }
  return done(counterexampleVerdict(details, example, shrunk));
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
