/**
 * runCheck (harness/run.ts) for properties whose cases are asynchronous (a kernel in another
 * process): the same seeds, shrinking, replay paths, vacuity rule and result shape. One
 * difference: a case in which the kernel itself broke (raised, died, hung, returned a wrong
 * shape or dtype: a KernelFault) ends the check as `error` at once, naming the case, instead of
 * being shrunk through further calls into a kernel that may be gone.
 */
import * as fc from "fast-check";
import type { CaseOutcome, CheckResult, Profile, PropertyCheck } from "../../harness/check.ts";
import { checkSeed, replayCommand } from "../../harness/run.ts";
import { emptyWorst, type Worst } from "../../oracle/compare.ts";
import { KernelFault } from "./kernel-session.ts";

export interface AsyncPropertyCheck<T> extends Omit<PropertyCheck<T>, "run"> {
  run(input: T): Promise<CaseOutcome>;
  /** A short description of a case for messages. */
  describe(input: T): string;
}

export interface AsyncRunOptions {
  readonly seed: number;
  readonly profile: Profile;
  readonly replay?: { seed: number; path: string };
}

class CaseFailed extends Error {}

export async function runAsyncCheck<T>(def: AsyncPropertyCheck<T>, opts: AsyncRunOptions): Promise<CheckResult> {
  const seed = opts.replay?.seed ?? checkSeed(opts.seed, def.id);
  const t0 = performance.now();
  const done = (r: Pick<CheckResult, "status" | "runs" | "path" | "worst" | "message" | "details">): CheckResult => ({
    id: def.id, class: def.class, subject: def.subject, tolerance: def.tolerance, seed, spec: def.spec, ...r,
    ms: Math.round((performance.now() - t0) * 1000) / 1000, replay: replayCommand(def.id, seed, r.path, def.replayArgs),
  });
  let worst: Worst = emptyWorst();
  // the measurements of the case with the worst error (a failure reports the shrunk case's)
  let worstDetails: CaseOutcome["details"];
  let informative = 0, discarded = 0, calls = 0;
  let lastVacuous = "";
  let broken: { fault: KernelFault; input: T; index: number } | undefined;
  const property = fc.asyncProperty(def.arb, async (input) => {
    if (broken !== undefined) return; // no more calls into a broken kernel (shrinking ends at once)
    const index = calls++;
    let out: CaseOutcome;
    try {
      out = await def.run(input);
    } catch (e) {
      if (e instanceof KernelFault) broken = { fault: e, input, index };
      throw e;
    }
    if (out.vacuous) {
      discarded++;
      lastVacuous = out.message ?? "vacuous comparison";
      fc.pre(false);
    }
    informative++;
    if (out.worst !== undefined && out.worst.abs >= worst.abs) {
      worst = out.worst;
      worstDetails = out.details;
    }
    if (!out.ok) throw new CaseFailed(out.message ?? "check failed");
  });
  const numRuns = opts.replay !== undefined ? 1 : def.runs[opts.profile];
  const details = await fc.check(property, { seed, numRuns, path: opts.replay?.path || undefined, endOnFailure: false, maxSkipsPerRun: 2 });
  const runs = details.numRuns;
  if (broken !== undefined) {
    // the path of the case itself: a replay of run `index` (from the replayed path, if any)
    const path = opts.replay?.path ? opts.replay.path : String(broken.index);
    return done({ status: "error", runs: broken.index + 1, path, message: `case ${def.describe(broken.input)}: ${broken.fault.message}` });
  }
  const discardNote = discarded > 0 ? ` (${discarded} near-zero case${discarded === 1 ? "" : "s"} discarded; last: ${lastVacuous})` : "";
  if (!details.failed || (details.counterexample === null && details.numSkips > 0)) {
    if (informative < Math.ceil(numRuns / 2)) {
      return done({ status: "vacuous", runs, path: "", message: `only ${informative} of ${numRuns} cases compared non-negligible values${discardNote}` });
    }
    if (!details.failed) {
      return done({
        status: "pass", runs, path: "", worst: worst.index >= 0 ? worst : undefined, message: discardNote ? discardNote.trim() : undefined,
        ...(worstDetails ? { details: worstDetails } : {}),
      });
    }
  }
  const path = details.counterexamplePath ?? "";
  const input = details.counterexample?.[0];
  const example = input === undefined ? "" : ` — case ${def.describe(input)}`;
  let shrunk: CaseOutcome | undefined;
  try {
    if (input !== undefined) shrunk = await def.run(input);
  } catch {
    shrunk = undefined;
  }
  const err = details.errorInstance;
  if (err instanceof CaseFailed) {
    return done({ status: "fail", runs, path, worst: shrunk?.worst, message: `${err.message}${example}`, ...(shrunk?.details ? { details: shrunk.details } : {}) });
  }
  return done({ status: "error", runs, path, message: `${err instanceof Error ? err.message : String(err)}${example}` });
}
