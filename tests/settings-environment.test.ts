/**
 * The environment is read in one module (environment.ts) into one typed record; no other module
 * reads or writes `process.env` (docs/spec/decisions.md#one-settings-record). The record travels
 * to worker threads in their first message and to child processes as their environment; nothing
 * writes it after start-up: --backend goes into the plan's settings (docs/spec/decisions.md#settings-argument).
 */
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { ROOT } from "../paths.ts";
import { adoptEnvironment, childEnvironment, environment, ENVIRONMENT_VARIABLES, readEnvironment } from "../environment.ts";
import { catalogueSettings, planRun, preflightBackends, CLI_NAMES, ENV_NAMES } from "../conformance/plan.ts";

/** The modules that may read the environment, each with its reason. Tests (tests/, *.test.ts) aside: they set up the processes they start. */
const READERS: Readonly<Record<string, string>> = {
  "environment.ts": "the settings module: reads the environment once into the record",
  "bin/nlc.js": "the npx launcher: runs under Node before Bun is found (NLC_BUN), and starts the suite with NLC_COMMAND; it can import no TypeScript",
};

/** Ways a module reaches the environment. */
const READ = /\bprocess\s*\.\s*env\b|\bprocess\s*\[\s*["'`]env["'`]\s*\]|\bBun\s*\.\s*env\b|\bimport\.meta\.env\b|\bprocess\s*\.\s*getenv\b/;

/** Comments mention the environment freely: they are no read. */
const code = (text: string) => text.replace(/\/\*[\s\S]*?\*\//g, "").replace(/(^|[^:"'`])\/\/[^\n]*/g, "$1");

/** The files outside the tests that read the environment, as `file:line`. */
export function environmentReads(files: readonly { rel: string; text: string }[]): string[] {
  const out: string[] = [];
  for (const { rel, text } of files) {
    if (rel in READERS || rel.startsWith("tests/") || /\.test\.ts$/.test(rel)) continue;
    code(text).split("\n").forEach((line, i) => {
      if (READ.test(line)) out.push(`${rel}:${i + 1}`);
    });
  }
  return out;
}

function sources(): { rel: string; text: string }[] {
  const ls = Bun.spawnSync({ cmd: ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.ts", "*.js", "*.mjs"], cwd: ROOT });
  return ls.stdout.toString().split("\n").filter((f) => f !== "" && !f.startsWith("node_modules/"))
    .map((rel) => ({ rel, text: readFileSync(resolve(ROOT, rel), "utf8") }));
}

test("process.env is read only in environment.ts (and the launcher, bin/nlc.js)", () => {
  const files = sources();
  expect(files.some((f) => f.rel === "conformance/plan.ts")).toBe(true);
  expect(environmentReads(files)).toEqual([]);
  // each exception is still one: a stale entry would hide nothing but says what is not so
  for (const rel of Object.keys(READERS)) expect(READ.test(code(files.find((f) => f.rel === rel)!.text))).toBe(true);
});

test("the scan catches a read, a write and Bun.env outside the settings module, not a comment", () => {
  const planted = [
    { rel: "conformance/kernel/native/spawn.ts", text: "const t = Number(process.env.NLC_KERNEL_TIMEOUT);\n" },
    { rel: "conformance/plan.ts", text: "// process.env is not written\nfunction f() {\n  process.env[\"NLC_BACKENDS\"] = \"ref\";\n}\n" },
    { rel: "harness/x.ts", text: "/* process.env */ const a = Bun.env.HOME;\n" },
    { rel: "oracle/y.ts", text: "const e = { ...process[\"env\"] };\n" },
    { rel: "tests/z.test.ts", text: "process.env.NLC_SEED = \"1\";\n" },
    { rel: "environment.ts", text: "readEnvironment(process.env);\n" },
  ];
  expect(environmentReads(planted)).toEqual(["conformance/kernel/native/spawn.ts:1", "conformance/plan.ts:3", "harness/x.ts:1", "oracle/y.ts:1"]);
});

test("the record holds the known variables only; a child process gets it as its environment", () => {
  expect(readEnvironment({ NLC_BACKENDS: "cpu-emu", NLC_UNKNOWN: "x", HOME: "/h" })).toEqual({ NLC_BACKENDS: "cpu-emu" });
  const saved = environment();
  try {
    adoptEnvironment({ ...saved, NLC_KERNEL_TIMEOUT: "7", NLC_BUILD_CUDA: undefined });
    const env = childEnvironment({ LD_PRELOAD: "/x.so" });
    expect(env.NLC_KERNEL_TIMEOUT).toBe("7");
    expect("NLC_BUILD_CUDA" in env).toBe(false);
    expect(env.LD_PRELOAD).toBe("/x.so");
    expect(env.PATH).toBeDefined(); // the inherited environment stays (compilers, Python)
    for (const k of Object.keys(ENVIRONMENT_VARIABLES)) expect(k).toMatch(/^(NLC_[A-Z0-9_]+|GITHUB_STEP_SUMMARY)$/);
  } finally {
    adoptEnvironment(saved);
  }
});

/** The modules that may call adoptEnvironment, each with its reason (tests aside: they set up their own record). */
const ADOPTERS: Readonly<Record<string, string>> = {
  "environment.ts": "where it is defined",
  "conformance/delegate-worker.ts": "a worker thread adopts the main thread's start-up record from its first job, before anything reads it",
  "conformance/sweep-worker.ts": "a sweep worker adopts the main thread's start-up record from its first message, before anything reads it",
};

/** The files outside the tests that call adoptEnvironment where they may not, as `file:line`. */
export function recordWriters(files: readonly { rel: string; text: string }[]): string[] {
  const out: string[] = [];
  for (const { rel, text } of files) {
    if (rel in ADOPTERS || rel.startsWith("tests/") || /\.test\.ts$/.test(rel)) continue;
    code(text).split("\n").forEach((line, i) => {
      if (/\badoptEnvironment\b/.test(line)) out.push(`${rel}:${i + 1}`);
    });
  }
  return out;
}

test("nothing writes the environment record after start-up: adoptEnvironment only where a worker thread starts", () => {
  const files = sources();
  expect(recordWriters(files)).toEqual([]);
  for (const rel of Object.keys(ADOPTERS)) expect(files.find((f) => f.rel === rel)!.text).toContain("adoptEnvironment(");
  // the scan catches a call planted in the plan, not a comment
  expect(recordWriters([
    { rel: "conformance/plan.ts", text: "// adoptEnvironment is not called here\nfunction f() {\n  adoptEnvironment({ ...environment(), NLC_BACKENDS: \"cpu-emu\" });\n}\n" },
    { rel: "conformance/sweep-worker.ts", text: "adoptEnvironment(job.environment);\n" },
  ])).toEqual(["conformance/plan.ts:3"]);
});

test("--backend goes into the plan's settings, never into the record or process.env; the record is frozen", () => {
  const record = environment();
  const snapshot = { ...record };
  const before = { ...process.env };
  const py = "py:examples/py-kernels/naive_delta.py:forward";
  const plan = planRun({ seed: 1, profile: "quick", filters: ["C5/cpu-emu/"], fixtureDirs: [], reportPath: null, names: CLI_NAMES,
    backends: ["cpu-emu", py, "ref"] });
  expect(plan.settings).toEqual({ backends: ["cpu-emu", py], namesReference: true, fixtureDirs: [], configLimit: "all" });
  expect(plan.catalogue.backends().map((b) => b.name)).toEqual(["ref", "cpu-emu", py]);
  preflightBackends(plan);
  // the record is the one read at start-up: the same object, unchanged, and it cannot be changed in place
  expect(environment()).toBe(record);
  expect({ ...environment() }).toEqual(snapshot);
  expect(Object.isFrozen(record)).toBe(true);
  expect(() => {
    (record as Record<string, string>).NLC_BACKENDS = "cpu-emu";
  }).toThrow();
  expect(childEnvironment().NLC_BACKENDS).toBe(snapshot.NLC_BACKENDS);
  expect({ ...process.env }).toEqual(before);
  // without --backend, each kind's variable of the record names the run's backends
  expect(catalogueSettings({ fixtureDirs: [], names: ENV_NAMES }, { NLC_BACKENDS: "cpu-f32", NLC_PY_BACKENDS: py, NLC_KERNEL_CONFIGS: "first" }))
    .toEqual({ backends: ["cpu-f32", py], namesReference: false, fixtureDirs: [], configLimit: "first" });
  expect(() => catalogueSettings({ fixtureDirs: [], names: ENV_NAMES }, { NLC_KERNEL_CONFIGS: "some" })).toThrow('NLC_KERNEL_CONFIGS="some"');
});
