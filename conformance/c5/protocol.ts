/**
 * The parent/child protocol of the C5 checks. The child is started as
 *
 *   bun conformance/c5/child.ts --probe --backends cpu-emu,cuda
 *       builds (if needed) and loads each backend; prints one line "@@nlc-probe <json>"
 *   bun conformance/c5/child.ts --backend cpu-emu --profile default  < request.json
 *       runs the requested checks (ChildRequest); prints "@@nlc-start <id>" before and
 *       "@@nlc-result <json CheckResult>" after each one, unbuffered
 *
 * and, while a check runs, "@@nlc-case <json>" before each generated case (its seed, fast-check path
 * and shape) and "@@nlc-call <symbol>" before each kernel call, so that the parent knows which
 * check, case and kernel were running when the child died.
 */
import { parseArgs } from "node:util";
import type { Resolved } from "../../ffi/backends.ts";
import { PROFILES, type CheckResult, type Profile } from "../../harness/check.ts";
import type { Fault } from "./plan.ts";

export interface ChildRequest {
  backend: string;
  profile: Profile;
  /** Normal runs: the run seed (each check derives its own, exactly as runCheck does). */
  runSeed?: number;
  /** The checks to run, in order; a replay (no run seed) names its one check's own seed and fast-check path. */
  checks: { id: string; seed?: number; path?: string }[];
  /** Test only: run the planted-fault kernel of this kind where its id appears in `checks`. */
  plant?: Fault;
  timeoutMs?: number;
}

/** What the probe reports per backend (the library itself stays in the child). */
export type Probed = Omit<Resolved, "lib">;

/** The child's command line, parsed. */
export type ChildMode = { kind: "probe"; backends: string[] } | { kind: "run"; backend: string; profile: Profile };

export function childArgs(mode: ChildMode): string[] {
  return mode.kind === "probe"
    ? ["--probe", "--backends", mode.backends.join(",")]
    : ["--backend", mode.backend, "--profile", mode.profile];
}

export function parseChildArgs(argv: string[]): ChildMode {
  const { values } = parseArgs({
    args: argv,
    options: { probe: { type: "boolean" }, backends: { type: "string" }, backend: { type: "string" }, profile: { type: "string" } },
  });
  if (values.probe) return { kind: "probe", backends: (values.backends ?? "").split(",").filter((s) => s !== "") };
  if (values.backend === undefined) throw new Error("conformance/c5/child.ts: --backend or --probe is required");
  const profile = (values.profile ?? "default") as Profile;
  if (!PROFILES.includes(profile)) throw new Error(`conformance/c5/child.ts: unknown profile '${profile}'`);
  return { kind: "run", backend: values.backend, profile };
}

const START = "@@nlc-start ", RESULT = "@@nlc-result ", PROBE = "@@nlc-probe ", CASE = "@@nlc-case ", CALL = "@@nlc-call ";

/** The case a check was running: enough to name it and to replay it. */
export interface CaseLine {
  id: string;
  seed: number;
  path: string;
  /** B, T, H, d, C, hyperparameters. */
  shape: Record<string, unknown>;
}

export const startLine = (id: string): string => `${START}${id}`;
export const resultLine = (r: CheckResult): string => `${RESULT}${JSON.stringify(r)}`;
export const probeLine = (p: Probed[]): string => `${PROBE}${JSON.stringify(p)}`;
export const caseLine = (c: CaseLine): string => `${CASE}${JSON.stringify(c)}`;
export const callLine = (symbol: string): string => `${CALL}${symbol}`;

/** The results a run child printed, and the check, case and kernel call it had started but not finished. */
export function parseRunOutput(stdout: string): { results: Map<string, CheckResult>; running?: string; lastCase?: CaseLine; lastCall?: string } {
  const results = new Map<string, CheckResult>();
  let running: string | undefined, lastCase: CaseLine | undefined, lastCall: string | undefined;
  for (const line of stdout.split("\n")) {
    if (line.startsWith(START)) {
      running = line.slice(START.length).trim();
      lastCase = lastCall = undefined;
    } else if (line.startsWith(CASE)) lastCase = JSON.parse(line.slice(CASE.length)) as CaseLine;
    else if (line.startsWith(CALL)) lastCall = line.slice(CALL.length).trim();
    else if (line.startsWith(RESULT)) {
      const r = JSON.parse(line.slice(RESULT.length)) as CheckResult;
      results.set(r.id, r);
      if (running === r.id) running = lastCase = lastCall = undefined;
    }
  }
  return { results, running, lastCase, lastCall };
}

/** The probe child's report, or undefined when it printed none. */
export function parseProbeOutput(stdout: string): Probed[] | undefined {
  const line = stdout.split("\n").find((l) => l.startsWith(PROBE));
  return line === undefined ? undefined : (JSON.parse(line.slice(PROBE.length)) as Probed[]);
}

/** A result for a check that did not run its cases (unavailable backend, dead child, unknown id). */
export function stubResult(id: string, status: CheckResult["status"], message: string, seed = 0, path = ""): CheckResult {
  return { id, class: "C5", subject: {}, status, tolerance: {}, runs: 0, seed, path, replay: "", ms: 0, spec: "", message };
}
