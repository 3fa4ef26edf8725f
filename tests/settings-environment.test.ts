/**
 * The environment is read in one module (environment.ts) into one typed record; no other module
 * reads or writes `process.env` (docs/spec/decisions.md#one-settings-record). The record travels
 * to worker threads in their first message and to child processes as their environment.
 */
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { ROOT } from "../paths.ts";
import { adoptEnvironment, childEnvironment, environment, ENVIRONMENT_VARIABLES, readEnvironment } from "../environment.ts";
import { kernelBackendNames } from "../ffi/backends.ts";
import { planRun, CLI_NAMES } from "../conformance/plan.ts";
import { pyBackendNames } from "../conformance/kernel/python/plan.ts";

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

test("--backend goes into the record, not into process.env; the backend lists read the record", () => {
  const saved = environment();
  const before = { ...process.env };
  try {
    planRun({ seed: 1, profile: "quick", filters: ["C5/cpu-emu/"], fixtureDirs: [], reportPath: null, names: CLI_NAMES,
      backends: ["cpu-emu", "py:examples/py-kernels/naive_delta.py:forward"] });
    expect(kernelBackendNames()).toEqual(["cpu-emu"]);
    expect(pyBackendNames()).toEqual(["py:examples/py-kernels/naive_delta.py:forward"]);
    expect(childEnvironment().NLC_BACKENDS).toBe("cpu-emu");
    expect({ ...process.env }).toEqual(before);
  } finally {
    adoptEnvironment(saved);
  }
});
