/** Results of the current process, shared by `bun test` (through its preload) and the CLI. */
import type { CheckResult } from "./check.ts";

export const collected: CheckResult[] = [];

export interface EnvOptions {
  seed: number;
  profile: "quick" | "default" | "deep";
  report: string | undefined;
  filters: string[];
  fixtureDirs: string[];
}

export const DEFAULT_SEED = 1;

/** Options for `bun test`, which takes no flags of ours: NLC_SEED, NLC_PROFILE, NLC_REPORT, NLC_FILTER, NLC_FIXTURES. */
export function envOptions(env: Record<string, string | undefined> = process.env): EnvOptions {
  const profile = env.NLC_PROFILE ?? "default";
  if (profile !== "quick" && profile !== "default" && profile !== "deep") {
    throw new Error(`NLC_PROFILE=${profile}: expected quick, default or deep`);
  }
  const seed = env.NLC_SEED === undefined ? DEFAULT_SEED : Number(env.NLC_SEED);
  if (!Number.isInteger(seed)) throw new Error(`NLC_SEED=${env.NLC_SEED}: expected an integer`);
  const split = (v: string | undefined) => (v ?? "").split(",").map((s) => s.trim()).filter((s) => s !== "");
  return { seed, profile, report: env.NLC_REPORT, filters: split(env.NLC_FILTER), fixtureDirs: split(env.NLC_FIXTURES) };
}
