/**
 * A `lib:` backend named on its own, as a kernel repository names its library: the run judges that
 * library's checks and not the suite's own (as a `py:` kernel's run does; docs/spec/decisions.md
 * D44), `lib:<path>@<name>` names its checks C5/lib-<name>/... in --list and in a run alike, and the
 * report lists only the backends the run named (not the reference, `ref`). A rule the library does
 * not implement is no check of the run: one line says so, and so does the report's entry of the
 * backend, `unimplemented` (docs/spec/conformance.md#undeclared).
 */
import { expect, test } from "bun:test";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { kernelOnlyFilters } from "../conformance/settings.ts";
import { kindOf } from "../conformance/backend-kinds.ts";
import { backendSlug, parseLibBackend } from "../ffi/backends.ts";
import { ROOT } from "../paths.ts";
import { runEnv } from "./run-env.ts";
import { buildPlantedLibs } from "./planted-libs.ts";
import { probeTorchSync } from "../oracle/torch-bridge.ts";
import { paramGradName, tensorName } from "../cases/kernel-tensors.ts";
import { elementAt } from "../oracle/kernel-judge.ts";
import type { ReportBackend } from "../harness/report.ts";

const CLI = join(ROOT, "conformance", "cli.ts");

function cli(args: string[], cwd = ROOT) {
  const r = Bun.spawnSync({ cmd: [process.execPath, CLI, ...args], cwd, env: runEnv(), stdout: "pipe", stderr: "pipe" });
  return { code: r.exitCode, out: r.stdout.toString(), err: r.stderr.toString() };
}

/** A copy of the cpu build under a directory of its own (a path holding @, as node_modules/@scope/... does). */
function library(): string {
  const built = join(ROOT, "build", "libnlk-cpu.so");
  if (!existsSync(built)) expect(Bun.spawnSync({ cmd: [process.execPath, join(ROOT, "ffi", "build.ts"), "cpu"], cwd: ROOT }).exitCode).toBe(0);
  const dir = join(mkdtempSync(join(tmpdir(), "nlc-lib-run-")), "@scope");
  mkdirSync(dir);
  const lib = join(dir, "libmine.so");
  copyFileSync(built, lib);
  return lib;
}

test("lib:<path>[@<name>]: the name after the last @ with no / after it names the checks", () => {
  expect(parseLibBackend("lib:/a/@scope/libx.so")).toEqual({ path: "/a/@scope/libx.so" });
  expect(parseLibBackend("lib:/a/@scope/libx.so@mine")).toEqual({ path: "/a/@scope/libx.so", declared: "mine" });
  expect(backendSlug("lib:/a/@scope/libx.so")).toBe("lib-libx");
  expect(backendSlug("lib:/a/libx.so@mine")).toBe("lib-mine");
});

test("two libraries whose checks would share ids are one usage error naming both and @<name>", () => {
  const kind = kindOf("lib:/a/libx.so");
  expect(kind.together(["lib:/a/libx.so", "lib:/b/libx.so"], "--backend")).toBe(
    "--backend 'lib:/a/libx.so' and --backend 'lib:/b/libx.so' would both have the check ids C5/lib-libx/...: name one with @<name>, e.g. 'lib:/b/libx.so@libx_2'");
  expect(kind.together(["lib:/a/libx.so", "lib:/b/libx.so@other", "lib:/a/libx.so"], "--backend")).toBeNull();
  expect(kind.together(["lib:/a/liby.so@x", "lib:/b/libz.so@x"], "nlc.config.json backends")).toContain("C5/lib-x/");
});

test("a run naming only lib: backends selects their own checks; one of the suite's builds beside them selects as before", () => {
  expect(kernelOnlyFilters([], ["lib:/a/libx.so@mine"])).toEqual(["C5/lib-mine/"]);
  expect(kernelOnlyFilters([], ["lib:/a/libx.so", "py:k.py:k"])).toEqual(["C5/lib-libx/", "C5/py-k/"]);
  expect(kernelOnlyFilters([], ["lib:/a/libx.so", "cpu-emu"])).toEqual([]);
  expect(kernelOnlyFilters(["C2"], ["lib:/a/libx.so"])).toEqual([]);
});

test("lib:…@name: --list and a run agree (C5/lib-<name>/...); the run judges the library alone and lists no backend it did not name", () => {
  const lib = library();
  const named = `lib:${lib}@mine`;
  const list = cli(["--list", "--backend", named]);
  expect(list.code).toBe(0);
  const ids = list.out.trim().split("\n");
  expect(ids.length).toBeGreaterThan(0);
  for (const id of ids) expect(id).toStartWith("C5/lib-mine/");
  const report = join(mkdtempSync(join(tmpdir(), "nlc-lib-run-r-")), "r.json");
  const run = cli(["--backend", named, "--rule", "delta", "--report", report]);
  expect(run.err).not.toContain("conformance:");
  expect(run.code).toBe(0);
  const doc = JSON.parse(readFileSync(report, "utf8")) as { checks: { id: string; status: string }[]; run: { backends: { name: string }[] } };
  expect(doc.checks.map((c) => c.id)).toEqual(ids.filter((id) => /^C5\/lib-mine\/delta[./]/.test(id)));
  expect(doc.checks.some((c) => c.status === "pass")).toBe(true);
  expect(doc.run.backends.map((b) => b.name)).toEqual([named]);
  expect(run.out).not.toContain("backend ref");
  // a name that cannot be a check id is refused by both, with the same message
  const badList = cli(["--list", "--backend", `lib:${lib}@my lib`]);
  const badRun = cli(["--backend", `lib:${lib}@my lib`, "--report", report]);
  expect(badList.code).toBe(2);
  expect(badRun.code).toBe(2);
  expect(badList.err).toContain("the name after @ ('my lib') names the checks");
  expect(badRun.err).toBe(badList.err);
}, 180_000);

test("rules a library does not implement: no skip per check in the log or the report, one line per backend", () => {
  const lib = join(ROOT, "build", "test-libs", "libdelta-only.so");
  buildPlantedLibs("planted-delta.cpp", ["none"], "none", () => lib);
  const named = `lib:${lib}@delta_only`;
  const report = join(mkdtempSync(join(tmpdir(), "nlc-lib-undeclared-")), "r.json");
  const run = cli(["--backend", named, "--report", report]);
  expect(run.code).toBe(0);
  expect(run.out).not.toContain("not implemented by");
  expect(run.out).toContain(`backend ${named}: does not implement delta.frozen, titans, titans.frozen,`);
  const doc = JSON.parse(readFileSync(report, "utf8")) as { checks: { id: string; status: string }[]; summary: { skip: number }; run: { backends: ReportBackend[] } };
  expect(doc.checks.map((c) => c.id)).toEqual(["forward", "backward", "checkpoint", "chunks", "workspace", "tape-e2e"].map((k) => `C5/lib-delta_only/delta/${k}`));
  expect(doc.summary.skip).toBe(0);
  // the report's backend says the same as the line
  const mine = doc.run.backends.find((b) => b.name === named)?.unimplemented;
  expect(mine?.variants.slice(0, 3)).toEqual(["delta.frozen", "titans", "titans.frozen"]);
  expect(run.out).toContain(`backend ${named}: does not implement ${mine!.variants.join(", ")} (${mine!.checks} checks not run;`);
  // a selection of rules it implements none of: nothing ran, and the line says why
  const none = cli(["--backend", named, "--rule", "titans", "--report", report]);
  expect(none.code).toBe(1);
  expect(none.out).toContain(`conformance: nothing ran: backend ${named} ran no check: it implements none of the selected rules`);
}, 180_000);

test.skipIf(!probeTorchSync().available)("rules a py: kernel does not declare: likewise one line, no skips", () => {
  const named = `py:${join(ROOT, "examples", "py-kernels", "naive_delta.py")}:naive_delta`;
  const report = join(mkdtempSync(join(tmpdir(), "nlc-py-undeclared-")), "r.json");
  const run = cli(["--backend", named, "--profile", "quick", "--report", report]);
  expect(run.code === 0 ? 0 : run.out + run.err).toBe(0);
  expect(run.out).not.toContain("is not implemented by");
  expect(run.out).toContain(`backend ${named}: does not implement delta.frozen, titans,`);
  const doc = JSON.parse(readFileSync(report, "utf8")) as { checks: { id: string; subject: { rule?: string } }[]; run: { backends: ReportBackend[] } };
  expect(doc.checks.length).toBeGreaterThan(0);
  for (const c of doc.checks) expect(c.subject.rule).toBe("delta");
  const mine = doc.run.backends.find((b) => b.name === named)?.unimplemented;
  expect(mine?.variants.slice(0, 2)).toEqual(["delta.frozen", "titans"]);
  expect(run.out).toContain(`backend ${named}: does not implement ${mine!.variants.join(", ")} (${mine!.checks} checks not run;`);
}, 180_000);

test("a failing lib: check's message: the case by its sizes and seed (the replay line carries it), elements by index, names as ffi/nlk.h's", () => {
  const lib = join(ROOT, "build", "test-libs", "libdelta-handoff.so");
  buildPlantedLibs("planted-delta.cpp", ["handoff"], "none", () => lib);
  const report = join(mkdtempSync(join(tmpdir(), "nlc-lib-msg-")), "r.json");
  const run = cli(["--backend", `lib:${lib}@handoff`, "--rule", "delta", "--report", report]);
  expect(run.code).toBe(1);
  const doc = JSON.parse(readFileSync(report, "utf8")) as { checks: { id: string; status: string; message?: string; details?: { signatures?: unknown } }[] };
  const failed = doc.checks.filter((c) => c.status === "fail");
  expect(failed.map((c) => c.id.split("/").pop())).toEqual(["forward", "backward", "chunks", "tape-e2e"]);
  for (const c of failed) {
    expect(c.message!).not.toContain('{"');
    // the headline, at most six other tensors over their bounds (then "and N more") and the case's sizes: no case JSON
    expect(c.message!.length).toBeLessThan(640);
    expect(c.message!).toMatch(/— case (B=\d+ H=\d+ )?T=\d+ d=\d+ .*seed=\d+$/);
    expect(c.message!).not.toMatch(/\)\[\d+\]|at \[\d+\] /);
  }
  // tape-e2e: its headline (the worst tensor: y [T, d] or a weight's gradient) by row and column
  expect(failed.find((c) => c.id.endsWith("/tape-e2e"))!.message).toMatch(/^(y|d\w+) \(sequence 0\): .* at \[\d+, \d+\] /);
  expect(failed.find((c) => c.id.endsWith("/chunks"))!.message).toMatch(/ at \(b=\d+, t=\d+, h=\d+, i=\d+\): three chunks/);
}, 180_000);

test("tensor names as ffi/nlk.h spells them: the final state M, tape-e2e's gradients dX, dW_K", () => {
  expect(tensorName({ part: "state", name: "M" }, false)).toBe("M");
  expect(tensorName({ part: "state", name: "M" }, false, "py")).toBe("state M");
  expect(paramGradName("W_K")).toBe("dW_K");
  expect(elementAt({ part: undefined, seq: 0, ref64: new Float64Array(34), shape: [17, 2] }, 33, undefined)).toBe("[16, 1]");
  expect(elementAt({ part: undefined, seq: 0, ref64: new Float64Array(34) }, 33, undefined)).toBe("[33]");
});
