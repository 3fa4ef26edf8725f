/**
 * The parent/child lines of the py: backend's checks (the same shape as C5's child protocol, kept
 * here so the two can change independently): "@@nlc-start <id>" before a check, "@@nlc-result
 * <json CheckResult>" after it.
 */
import type { CheckResult, Profile } from "../../harness/check.ts";

export interface PyChildRequest {
  backend: string;
  profile: Profile;
  /** Normal runs: the run seed (each check derives its own). */
  runSeed?: number;
  /** A replay names its one check's own seed and fast-check path. */
  checks: { id: string; seed?: number; path?: string }[];
}

const START = "@@nlc-start ", RESULT = "@@nlc-result ";

export const startLine = (id: string): string => `${START}${id}`;
export const resultLine = (r: CheckResult): string => `${RESULT}${JSON.stringify(r)}`;

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

export function stubResult(id: string, status: CheckResult["status"], message: string, seed = 0): CheckResult {
  return { id, class: "C5", subject: {}, status, tolerance: {}, runs: 0, seed, path: "", replay: "", ms: 0, spec: "", message };
}
