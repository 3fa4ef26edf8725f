/** The settings of `bun test` (conformance/conformance.test.ts), which takes no flags of ours. */
import { PROFILES, type Profile } from "./check.ts";
import { parseShard, type Shard } from "./shard.ts";
import { environment, type Environment } from "../environment.ts";

interface EnvOptions {
  seed: number;
  profile: Profile;
  report: string | undefined;
  filters: string[];
  fixtureDirs: string[];
  shard: Shard | undefined;
}

export const DEFAULT_SEED = 1;

/** Options for `bun test`, which takes no flags of ours: NLC_SEED, NLC_PROFILE, NLC_REPORT, NLC_FILTER, NLC_FIXTURES, NLC_SHARD. */
export function envOptions(env: Environment = environment()): EnvOptions {
  const profile = (env.NLC_PROFILE ?? "default") as Profile;
  if (!(PROFILES as readonly string[]).includes(profile)) {
    throw new Error(`NLC_PROFILE=${profile}: expected ${PROFILES.join(", ")}`);
  }
  const seed = env.NLC_SEED === undefined ? DEFAULT_SEED : Number(env.NLC_SEED);
  if (!Number.isInteger(seed)) throw new Error(`NLC_SEED=${env.NLC_SEED}: expected an integer`);
  const split = (v: string | undefined) => (v ?? "").split(",").map((s) => s.trim()).filter((s) => s !== "");
  let shard: Shard | undefined;
  try {
    shard = env.NLC_SHARD === undefined || env.NLC_SHARD === "" ? undefined : parseShard(env.NLC_SHARD);
  } catch (e) {
    throw new Error(`NLC_SHARD=${env.NLC_SHARD}: ${e instanceof Error ? e.message : String(e)}`);
  }
  return { seed, profile, report: env.NLC_REPORT, filters: split(env.NLC_FILTER), fixtureDirs: split(env.NLC_FIXTURES), shard };
}
