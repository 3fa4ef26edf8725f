/**
 * The parent/child protocol of the C5 checks. The child is started as
 *
 *   bun conformance/c5/child.ts --probe --backends cpu-emu,cuda
 *       builds (if needed) and loads each backend; prints one line "@@nlc-probe <json>"
 *   bun conformance/c5/child.ts --backend cpu-emu --profile default  < request.json
 *       runs the requested checks (ChildRequest); prints "@@nlc-start <id>" before and
 *       "@@nlc-result <json CheckResult>" after each one, unbuffered
 *
 * so that the parent knows which check was running when the child died.
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

const START = "@@nlc-start ", RESULT = "@@nlc-result ", PROBE = "@@nlc-probe ";

export const startLine = (id: string): string => `${START}${id}`;
export const resultLine = (r: CheckResult): string => `${RESULT}${JSON.stringify(r)}`;
export const probeLine = (p: Probed[]): string => `${PROBE}${JSON.stringify(p)}`;

/** The results a run child printed, and the check it had started but not finished (if any). */
export function parseRunOutput(stdout: string): { results: Map<string, CheckResult>; running?: string } {
  const results = new Map<string, CheckResult>();
  let running: string | undefined;
  for (const line of stdout.split("\n")) {
    if (line.startsWith(START)) running = line.slice(START.length).trim();
    else if (line.startsWith(RESULT)) {
      const r = JSON.parse(line.slice(RESULT.length)) as CheckResult;
      results.set(r.id, r);
      if (running === r.id) running = undefined;
    }
  }
  return { results, running };
}

/** The probe child's report, or undefined when it printed none. */
export function parseProbeOutput(stdout: string): Probed[] | undefined {
  const line = stdout.split("\n").find((l) => l.startsWith(PROBE));
  return line === undefined ? undefined : (JSON.parse(line.slice(PROBE.length)) as Probed[]);
}

/** A result for a check that did not run its cases (unavailable backend, dead child, unknown id). */
export function stubResult(id: string, status: CheckResult["status"], message: string, seed = 0): CheckResult {
  return { id, class: "C5", subject: {}, status, tolerance: {}, runs: 0, seed, path: "", replay: "", ms: 0, spec: "", message };
}
