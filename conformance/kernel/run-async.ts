/**
 * runCheck (harness/run.ts) for properties whose cases are asynchronous (a kernel in another
 * process): the same seeds, shrinking, replay paths, vacuity rule and result shape. One
 * difference: a case in which the kernel itself broke (raised, died, hung, returned a wrong
 * shape or dtype: a KernelFault) ends the check as `error` at once, naming the case, instead of
 * being shrunk through further calls into a kernel that may be gone.
 */
import * as fc from "fast-check";
import { runsFor, type CaseOutcome, type CheckResult, type Profile, type PropertyCheck } from "../../harness/check.ts";
import { CaseTally, counterexampleVerdict } from "../../harness/run.ts";
import { checkSeed, replayArgsOf, replayCommand } from "../../harness/replay-command.ts";
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
  /** Called with every generated case before it runs (harness/run.ts RunOptions.onCase). */
  readonly onCase?: (checkId: string, input: unknown) => void;
}

export async function runAsyncCheck<T>(def: AsyncPropertyCheck<T>, opts: AsyncRunOptions): Promise<CheckResult> {
  const seed = opts.replay?.seed ?? checkSeed(opts.seed, def.id);
  const t0 = performance.now();
  const done = (r: Pick<CheckResult, "status" | "runs" | "path" | "worst" | "message" | "details">): CheckResult => ({
    id: def.id, class: def.class, subject: def.subject, tolerance: def.tolerance, seed, spec: def.spec, ...r,
    ms: Math.round((performance.now() - t0) * 1000) / 1000, replay: replayCommand(def.id, seed, r.path, replayArgsOf(def, opts.profile)),
  });
  const tally = new CaseTally();
  let calls = 0;
  let broken: { fault: KernelFault; input: T; index: number } | undefined;
  const property = fc.asyncProperty(def.arb, async (input) => {
    if (broken !== undefined) return; // no more calls into a broken kernel (shrinking ends at once)
    opts.onCase?.(def.id, input);
    const index = calls++;
    let out: CaseOutcome;
    try {
      out = await def.run(input);
    } catch (e) {
      if (e instanceof KernelFault) broken = { fault: e, input, index };
      throw e;
    }
    tally.record(out);
  });
  const numRuns = opts.replay !== undefined ? 1 : runsFor(def.runs, opts.profile);
  const details = await fc.check(property, {
    seed, numRuns, path: opts.replay?.path || undefined, endOnFailure: false, maxSkipsPerRun: 2,
    ...(def.examples !== undefined ? { examples: def.examples.map((e) => [e] as [typeof e]) } : {}),
  });
  if (broken !== undefined) {
    // the path of the case itself: a replay of run `index` (from the replayed path, if any)
    const path = opts.replay?.path ? opts.replay.path : String(broken.index);
    return done({ status: "error", runs: broken.index + 1, path, message: `case ${def.describe(broken.input)}: ${broken.fault.message}` });
  }
  const settled = tally.settled(details, numRuns);
  if (settled !== null) return done(settled);
  const input = details.counterexample?.[0];
  const example = input === undefined ? "" : ` — case ${def.describe(input)}`;
  let shrunk: CaseOutcome | undefined;
  try {
    if (input !== undefined) shrunk = await def.run(input);
  } catch {
    shrunk = undefined;
  }
  return done(counterexampleVerdict(details, example, shrunk));
}
