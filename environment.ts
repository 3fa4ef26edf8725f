/**
 * The environment, read once: the one module that reads `process.env` (tests/settings-environment.test.ts
 * holds every other module to that). Each variable the suite understands is a key of the typed
 * record `Environment`; a process takes its record from its own environment at its edge (the CLI,
 * `bun test`, a child process started by the suite), or from the thread that started it (a worker
 * thread adopts the record its first message carries, before anything reads it). The record is
 * frozen and nothing writes it after start-up: what the command line sets (--backend) goes into the
 * run's settings (conformance/catalogue-settings.ts), passed as an argument. A child process gets
 * the record as its environment (`childEnvironment`). Layer 0: the reference's neighbours (ffi/)
 * read it too.
 */

/** Every variable the suite reads, with what it sets (docs/running.md#environment, docs/spec/conformance.md). */
export const ENVIRONMENT_VARIABLES = {
  NLC_BACKENDS: "kernel backends of C5 (comma-separated); --backend, when given, names the run's instead",
  NLC_PY_BACKENDS: "py:<module>:<callable> kernel backends (comma-separated); --backend, when given, names the run's instead",
  NLC_JAX_BACKENDS: "jax:<module>:<callable> kernel backends (comma-separated); --backend, when given, names the run's instead",
  NLC_IN_PROCESS_BACKENDS: "in-process kernel backends (docs/contributing.md \"Adding a backend kind\"; comma-separated); --backend, when given, names the run's instead",
  NLC_KERNEL_TIMEOUT: "seconds a batch of native kernel checks may take",
  NLC_KERNEL_PRELOAD: "LD_PRELOAD of the native kernel children (e.g. a sanitizer runtime)",
  NLC_PY_KERNEL_TIMEOUT: "seconds one request to a py: kernel host may take",
  NLC_KERNEL_CONFIGS: "all | first: which configurations of a py: kernel (variants of a native pair) are judged",
  NLC_FLA_FIRST_CONFIG: "replaced by NLC_KERNEL_CONFIGS=first (an error saying so)",
  NLC_BUILD_CUDA: "1: build the CUDA backends without a GPU",
  NLC_TORCH_PYTHON: "the Python with torch the bridges run",
  NLC_TORCH_THREADS: "torch.set_num_threads of a bridge",
  NLC_TORCH_ZYGOTE: "0: each Python process imports torch itself (no zygote)",
  NLC_MIN_POWER: "bun test: the --min-power of the run",
  NLC_SERIAL: "1: every check in one thread",
  NLC_SHARE_MIN_MS: "estimated in-process work (ms) below which a lane takes no share",
  NLC_PROGRESS_FD: "3: a child's progress lines go to fd 3 (set by harness/child-process.ts)",
  NLC_RUNNER: "1: this process runs the checks (the supervised runner, or supervision off)",
  NLC_COMMAND: "how the suite was started (`npx nlc`), for replay lines",
  NLC_UPDATE_TEST_TIMES: "1: `npm test` records the test files' times",
  NLC_TEST_NAME_PATTERN: "`npm test -- -t PATTERN` handed to conformance/conformance.test.ts",
  NLC_SEED: "bun test: the run seed",
  NLC_PROFILE: "bun test: the profile",
  NLC_REPORT: "bun test: where the report goes",
  NLC_FILTER: "bun test: filters (comma-separated)",
  NLC_FIXTURES: "bun test: extra fixture directories (comma-separated)",
  NLC_SHARD: "bun test: the shard (k/n)",
  GITHUB_STEP_SUMMARY: "GitHub Actions: the file the job summary is appended to",
} as const;

export type EnvironmentVariable = keyof typeof ENVIRONMENT_VARIABLES;

/** The suite's settings from the environment: each known variable, unset ones absent. */
export type Environment = { readonly [K in EnvironmentVariable]?: string };

const NAMES = Object.keys(ENVIRONMENT_VARIABLES) as EnvironmentVariable[];

/** The known variables of `source` (unset and unknown ones left out). */
export function readEnvironment(source: Readonly<Record<string, string | undefined>>): Environment {
  const out: { [K in EnvironmentVariable]?: string } = {};
  for (const k of NAMES) if (source[k] !== undefined) out[k] = source[k];
  return out;
}

let current: Environment | undefined;

/** This process's (or worker thread's) record, frozen: read from the environment on first use unless adopted. */
export function environment(): Environment {
  return (current ??= Object.freeze(readEnvironment(process.env)));
}

/**
 * Makes `env` this thread's record: a worker thread adopts the start-up record its first message
 * carries, before anything reads it (tests set up their own). Nothing else calls it: a setting
 * made at start-up travels in the run's settings, never as a write into the record.
 */
export function adoptEnvironment(env: Environment): void {
  current = Object.freeze(readEnvironment(env));
}

/**
 * The environment of a child process the suite starts: the inherited one (PATH, HOME, the
 * compilers' and Python's own variables) with the suite's variables as this record has them (an
 * unset one removed), then `extra`.
 */
export function childEnvironment(extra: Readonly<Record<string, string | undefined>> = {}): Record<string, string> {
  const env: Record<string, string | undefined> = { ...process.env };
  const rec = environment();
  for (const k of NAMES) env[k] = rec[k];
  Object.assign(env, extra);
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined) out[k] = v;
  return out;
}
