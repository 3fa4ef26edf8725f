/**
 * The environment for a run a test starts: this process's, without the NLC_* run settings of the
 * `npm test` around it (a sharded CI job's NLC_SHARD must not shard the test's own small run).
 */
const RUN_SETTINGS = ["NLC_SEED", "NLC_PROFILE", "NLC_REPORT", "NLC_FILTER", "NLC_FIXTURES", "NLC_SHARD", "NLC_BACKENDS", "NLC_PY_BACKENDS", "NLC_UPDATE_TEST_TIMES"];

export function runEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !RUN_SETTINGS.includes(k)) env[k] = v;
  return { ...env, ...extra };
}
