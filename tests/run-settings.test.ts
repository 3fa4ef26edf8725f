/**
 * What a run does with its settings before and after its checks: unusable settings are usage errors
 * (exit 2) before any check runs; a missing PyTorch interpreter skips C9 with the reason; a partial
 * report's closing line and --summary say it is partial and fail; --case output is the document
 * alone; `timings` merges; the CLI and `bun test` write the same report.
 */
import { expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { closingLine, notRunOf } from "../harness/report.ts";
import { formatTimes, loadTimes, mergeTimes } from "../harness/shard.ts";
import { ROOT } from "../paths.ts";
import { runEnv } from "./run-env.ts";
import { probeTorchSync } from "../oracle/torch-bridge.ts";
import { check, report } from "./synthetic-report.ts";

const CLI = join(ROOT, "conformance", "cli.ts");

function cli(args: string[], env: Record<string, string> = {}) {
  const r = Bun.spawnSync({ cmd: [process.execPath, CLI, ...args], cwd: ROOT, env: runEnv(env), stdout: "pipe", stderr: "pipe" });
  return { code: r.exitCode, out: r.stdout.toString(), err: r.stderr.toString() };
}

const tmp = (what: string) => mkdtempSync(join(tmpdir(), `nlc-${what}-`));

test("--report naming a directory is a usage error before any check runs, and leaves nothing behind", () => {
  const dir = tmp("rdir");
  const r = cli(["--filter", "C2/delta", "--report", dir]);
  expect(r.code).toBe(2);
  expect(r.err).toContain(`--report ${dir}: is a directory`);
  expect(r.out).not.toContain("checks, seed");
  expect(readdirSync(dir)).toEqual([]);
});

test("--backend with an unknown name is a usage error naming the flag and every backend kind", () => {
  const r = cli(["--backend", "foo", "--list"]);
  expect(r.code).toBe(2);
  expect(r.err).toContain("--backend 'foo': unknown backend");
  for (const kind of ["cpu-emu", "cuda", "cpu-bf16", "lib:<path", "py:<module>:<callable>"]) expect(r.err).toContain(kind);
});

test("a missing NLC_TORCH_PYTHON interpreter skips C9 with the reason; the run tested nothing, so it fails unless --allow-skipped", () => {
  const out = join(tmp("c9"), "r.json");
  const strict = cli(["--filter", "C9/delta", "--report", out], { NLC_TORCH_PYTHON: "/nonexistent/python" });
  expect(strict.code).toBe(1);
  expect(strict.out).toContain("conformance: nothing ran: every selected check");
  const r = cli(["--filter", "C9/delta", "--report", out, "--allow-skipped"], { NLC_TORCH_PYTHON: "/nonexistent/python" });
  expect(r.err).not.toContain("posix_spawn");
  expect(r.code).toBe(0);
  const doc = JSON.parse(readFileSync(out, "utf8"));
  expect(doc.checks.length).toBeGreaterThan(0);
  for (const c of doc.checks) {
    expect(c.status).toBe("skip");
    expect(c.message).toContain("/nonexistent/python cannot be started");
  }
}, 60_000);

test("a partial report: the closing line says so and counts what did not run as failed; --summary exits 1", () => {
  const partial = { ...report([check("C2/a", "pass"), check("C2/b", "pass")], { planned: 5 }), partial: true as const };
  expect(notRunOf(partial)).toBe(3);
  const line = closingLine(partial.summary, notRunOf(partial));
  expect(line).toBe("conformance: 2 passed, 3 failed (0 fail, 0 vacuous, 0 error, 0 skipped, 3 not run: partial, the run was interrupted)");
  const path = join(tmp("partial"), "r.partial.json");
  writeFileSync(path, JSON.stringify(partial));
  const r = cli(["--summary", path]);
  expect(r.code).toBe(1);
  expect(r.out.trim()).toBe(line);
  // An older partial report without the planned count still reads as failed.
  const { planned: _p, ...run } = partial.run;
  writeFileSync(path, JSON.stringify({ ...partial, run }));
  expect(cli(["--summary", path]).out).toContain("2 passed, 1 failed");
});

test("--case writes the document alone: on stdout, or to --out FILE", () => {
  const args = ["--rule", "delta", "--case", '{"d":2,"seq_len":2,"seed":3}'];
  const r = cli(args);
  expect(r.code).toBe(0);
  const doc = JSON.parse(r.out);
  expect(doc.format).toBe("nlc-fixture/1");
  const file = join(tmp("case"), "sub", "case.json");
  const w = cli([...args, "--out", file]);
  expect(w.code).toBe(0);
  expect(w.out).toBe("");
  expect(JSON.parse(readFileSync(file, "utf8"))).toEqual(doc);
});

test("`npm run -s conformance -- --case` prints nothing but the document", () => {
  const r = Bun.spawnSync({ cmd: ["npm", "run", "-s", "conformance", "--", "--rule", "delta", "--case", '{"d":2,"seq_len":2,"seed":3}'], cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  expect(r.exitCode).toBe(0);
  expect(JSON.parse(r.stdout.toString()).format).toBe("nlc-fixture/1");
}, 60_000);

test("timings merges a filtered run into the table instead of replacing it; a partial report is refused", () => {
  const base = { format: "nlc-check-times/1" as const, profile: "default", ms: { "C2/a": 10, "C2/b": 20 } };
  expect(mergeTimes(base, { format: "nlc-check-times/1", profile: "default", ms: { "C2/b": 5, "C0/z": 1 } }).ms).toEqual({ "C0/z": 1, "C2/a": 10, "C2/b": 5 });
  // The command on a copy of the repository's table: every check it knew is still there.
  const known = Object.keys(loadTimes().ms).length;
  expect(known).toBeGreaterThan(100);
  const dir = tmp("timings");
  const partial = join(dir, "p.json");
  writeFileSync(partial, JSON.stringify({ ...report([check("C2/a", "pass")]), partial: true }));
  const r = cli(["timings", partial]);
  expect(r.code).toBe(2);
  expect(r.err).toContain("partial report");
  expect(formatTimes(mergeTimes(loadTimes(), { format: "nlc-check-times/1", profile: "default", ms: { "C2/delta": 1 } })).split("\n").length).toBeGreaterThan(known);
});

test("bun test with a filter that matches no check fails, naming the filter", () => {
  const r = Bun.spawnSync({
    cmd: [process.execPath, "test", "conformance/conformance.test.ts"], cwd: ROOT, stdout: "pipe", stderr: "pipe",
    env: { ...runEnv(), NLC_FILTER: "no-such-check-anywhere", NLC_REPORT: join(tmp("nofilter"), "r.json") },
  });
  expect(r.exitCode).not.toBe(0);
  expect(r.stdout.toString() + r.stderr.toString()).toContain("NLC_FILTER: 'no-such-check-anywhere' matches no check");
}, 60_000);

test("the CLI and bun test run the same plan and write the same report (apart from timings), skips counted as skips", () => {
  const dir = tmp("same");
  mkdirSync(dir, { recursive: true });
  // A skip decided at run time (C9 without an interpreter) next to passes.
  const filter = "C8/delta,C9/delta";
  const env = { ...runEnv(), NLC_TORCH_PYTHON: "/nonexistent/python" };
  const viaCli = join(dir, "cli.json"), viaTest = join(dir, "test.json"), junit = join(dir, "junit.xml");
  expect(cli(["--filter", filter, "--report", viaCli], { NLC_TORCH_PYTHON: "/nonexistent/python" }).code).toBe(0);
  const t = Bun.spawnSync({
    cmd: [process.execPath, "test", "conformance/conformance.test.ts", "--reporter=junit", `--reporter-outfile=${junit}`], cwd: ROOT, stdout: "pipe", stderr: "pipe",
    env: { ...env, NLC_FILTER: filter, NLC_REPORT: viaTest },
  });
  expect(t.exitCode).toBe(0);
  const strip = (path: string) => {
    const doc = JSON.parse(readFileSync(path, "utf8"));
    const { started: _s, ended: _e, ...run } = doc.run;
    return { ...doc, run, checks: doc.checks.map(({ ms: _ms, ...c }: { ms: number }) => c) };
  };
  const a = strip(viaCli), b = strip(viaTest);
  expect(b).toEqual(a);
  const skips = a.checks.filter((c: { status: string }) => c.status === "skip").length;
  expect(skips).toBeGreaterThan(0);
  const xml = readFileSync(junit, "utf8");
  expect(Number(/<testsuites[^>]* skipped="(\d+)"/.exec(xml)![1])).toBe(skips);
  expect(Number(/<testsuites[^>]* tests="(\d+)"/.exec(xml)![1])).toBe(a.checks.length);
  expect(existsSync(join(dir, "test.partial.json"))).toBe(false);
}, 180_000);

test("a library backend is built and probed once per run: \"kernel backends: building\" is printed once", () => {
  const dir = tmp("lib");
  const lib = join(dir, "libdelta_example.so");
  const cc = Bun.spawnSync({ cmd: ["g++", "-std=c++17", "-O2", "-shared", "-fPIC", `-I${join(ROOT, "ffi")}`, "-o", lib, join(ROOT, "examples", "delta-cpu", "delta.cpp")] });
  expect(cc.exitCode).toBe(0);
  // The kernel checks in a worker thread beside an in-process check: the preflight's probe is reused.
  const r = cli(["--backend", `lib:${lib}`, "--filter", "C5/lib,C8/delta/write-read-identity", "--report", join(dir, "r.json")]);
  expect(r.code).toBe(0);
  expect((r.err + r.out).match(/kernel backends: building/g)?.length).toBe(1);
  // Kernel checks and crash-isolation checks in two worker threads: one probe between them.
  const two = cli(["--filter", "C5/cpu-emu/delta/forward,C5/cpu-emu/emu/crash-isolation,C8/delta/write-read-identity", "--report", join(dir, "r2.json")]);
  expect(two.code).toBe(0);
  expect((two.err + two.out).match(/kernel backends: building/g)?.length).toBe(1);
}, 120_000);

test.skipIf(!probeTorchSync().available)("bun test runs a py: backend named in NLC_PY_BACKENDS", () => {
  const report = join(tmp("pybun"), "r.json");
  const t = Bun.spawnSync({
    cmd: [process.execPath, "test", "conformance/conformance.test.ts"], cwd: ROOT, stdout: "pipe", stderr: "pipe",
    env: { ...runEnv(), NLC_PY_BACKENDS: "py:examples/py-kernels/naive_delta.py:naive_delta", NLC_BACKENDS: "ref", NLC_FILTER: "C5/py-naive_delta/delta/", NLC_REPORT: report },
  });
  expect(t.stdout.toString() + t.stderr.toString()).not.toContain("was not probed");
  expect(t.exitCode).toBe(0);
  const doc = JSON.parse(readFileSync(report, "utf8"));
  expect(doc.checks.length).toBeGreaterThan(0);
  expect(doc.checks.filter((c: { status: string }) => c.status === "pass").length).toBeGreaterThan(0);
  expect(doc.run.backends.find((b: { name: string }) => b.name.startsWith("py:")).available).toBe(true);
}, 180_000);
