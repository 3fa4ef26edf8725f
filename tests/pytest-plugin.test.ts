/**
 * The pytest plugin (python/pytest-nlc, docs/pytest-plugin.md) in a Python kernel repository: the
 * plugin built as a wheel with Debian's Python tooling (pip from the source path where `build` is
 * missing) and installed into a venv that sees the system's pytest and torch, nl-conformance
 * installed from `npm pack`, then `pytest` there. A correct kernel (examples/py-kernels/
 * naive_delta.py): exit 0, its checks as JUnit test cases; its planted twin (dq_scaled of
 * naive_delta_planted.py, a query gradient 1 % too large): exit 1, the check's message and replay
 * line in the failure; `[tool.nlc]` in pyproject.toml; `-k` narrowing the nlc run; a run that tests
 * nothing failing; no node and no installed package each named. Planted in the plugin, each seen to
 * fail this test: a failing check mapped to a pass (the failure's message missing), the run never
 * narrowed (a deselected check in the run's report), the run item passing whatever ran.
 * Needs /usr/bin/python3 with pytest and torch, npm and node.
 */
import { expect, test } from "bun:test";
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "../paths.ts";
import { hasNpm, installTarball, kernelRepository, pack, sh } from "./installed.ts";
import { UNDECLARED_DETAILS, type CheckDef } from "../harness/check.ts";
import type { RunOutcome } from "../conformance/parallel.ts";
import { CLI_NAMES, type RunPlan, type RunRequest } from "../conformance/plan.ts";
import { runReport } from "../conformance/run-report.ts";
import { check } from "./synthetic-report.ts";

const PY = "/usr/bin/python3";
const has = (mod: string) => Bun.spawnSync({ cmd: [PY, "-c", `import ${mod}`], stdout: "pipe", stderr: "pipe" }).exitCode === 0;
const missing = [!has("pytest") && `${PY} lacks pytest (Debian: python3-pytest)`, !has("torch") && `${PY} lacks torch (Debian: python3-torch)`, !hasNpm && "no npm"].filter((m) => m !== false);
if (missing.length > 0) console.log(`pytest-plugin.test.ts skipped: ${missing.join("; ")}`);

/** The JUnit XML's test cases: name -> the text of its failure, "skipped", or "" when it passed. */
function junitCases(xml: string): Map<string, string> {
  const cases = new Map<string, string>();
  for (const m of xml.matchAll(/<testcase [^>]*?\sname="([^"]*)"[^>]*?(?:\/>|>([\s\S]*?)<\/testcase>)/g)) {
    const body = m[2] ?? "";
    const failure = /<(failure|error)[^>]*>([\s\S]*?)<\/\1>|<(failure|error)[^>]*message="([^"]*)"/.exec(body);
    cases.set(m[1]!, failure !== null ? (failure[2] ?? failure[4] ?? "") : /<skipped/.test(body) ? "skipped" : "");
  }
  return cases;
}

const unxml = (s: string) => s.replace(/&quot;/g, '"').replace(/&apos;/g, "'").replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");

test.skipIf(missing.length > 0)("pytest collects a kernel repository's nlc config: pass, planted failure, -k, missing tools", () => {
  const work = mkdtempSync(join(tmpdir(), "nlc-pytest-"));
  try {
    // the plugin: a wheel built from a copy of its source (no build output in the repository), in a venv seeing the system's packages
    const src = join(work, "pytest-nlc");
    cpSync(join(ROOT, "python", "pytest-nlc"), src, { recursive: true });
    const venv = join(work, "venv");
    const mk = sh([PY, "-m", "venv", "--system-site-packages", "--without-pip", venv], work);
    expect(mk.code === 0 ? 0 : mk.out).toBe(0);
    const python = join(venv, "bin", "python");
    let install;
    if (has("build")) {
      const built = sh([PY, "-m", "build", "--wheel", "--no-isolation", "--outdir", join(work, "dist"), src], work);
      expect(built.code === 0 ? 0 : built.out).toBe(0);
      const wheel = join(work, "dist", readdirSync(join(work, "dist")).find((f) => f.endsWith(".whl"))!);
      install = sh([PY, "-m", "pip", "--python", python, "install", "--no-index", "--no-deps", wheel], work);
    } else {
      install = sh([PY, "-m", "pip", "--python", python, "install", "--no-index", "--no-deps", "--no-build-isolation", src], work);
    }
    expect(install.code === 0 ? 0 : install.out).toBe(0);

    // a kernel repository: the example kernel and its planted twin, nl-conformance from the tarball
    const repo = join(work, "repo");
    const kernels = join(ROOT, "examples", "py-kernels");
    kernelRepository(repo, {
      "naive_delta.py": readFileSync(join(kernels, "naive_delta.py"), "utf8"),
      "naive_delta_planted.py": readFileSync(join(kernels, "naive_delta_planted.py"), "utf8"),
      "nlc.config.json": JSON.stringify({ backends: ["py:naive_delta.py:naive_delta"], profile: "quick" }),
    });
    const npm = installTarball(repo, pack(work));
    expect(npm.code === 0 ? 0 : npm.out).toBe(0);
    const pytest = (args: string[], env: Record<string, string> = {}) => sh([python, "-m", "pytest", "-p", "no:cacheprovider", ...args], repo, env);

    // the correct kernel: exit 0, each check a test case, the kernel's own passing
    const good = pytest(["--junitxml", "good.xml", "-rs"]);
    expect(good.code === 0 ? 0 : good.out).toBe(0);
    const goodCases = junitCases(readFileSync(join(repo, "good.xml"), "utf8"));
    expect(goodCases.get("C5/py-naive_delta/delta/forward")).toBe("");
    expect(goodCases.get("C5/py-naive_delta/delta/backward")).toBe("");
    expect(goodCases.get("run")).toBe("");
    expect([...goodCases.keys()].filter((n) => n !== "run").every((n) => n.startsWith("C5/py-naive_delta/"))).toBe(true);
    expect(good.out).toMatch(/nlc \(nlc\.config\.json\): conformance: \d+ passed, 0 failed/);

    // the planted twin: exit 1, the check's message and replay line in its JUnit failure
    writeFileSync(join(repo, "nlc.config.json"), JSON.stringify({ backends: ["py:naive_delta_planted.py:dq_scaled"], profile: "quick" }));
    const bad = pytest(["--junitxml", "bad.xml", "--nlc-report", "reports/planted.json"]);
    expect(bad.code).toBe(1);
    const report = JSON.parse(readFileSync(join(repo, "reports", "planted.json"), "utf8"));
    const backward = report.checks.find((c: { id: string }) => c.id === "C5/py-dq_scaled/delta/backward");
    expect(backward.status).toBe("fail");
    const failure = unxml(junitCases(readFileSync(join(repo, "bad.xml"), "utf8")).get("C5/py-dq_scaled/delta/backward") ?? "");
    expect(failure).toContain(`fail: ${backward.message}`);
    expect(failure).toContain(`replay: ${backward.replay}`);
    expect(bad.out).toContain("FAILED nlc.config.json::C5/py-dq_scaled/delta/backward");

    // [tool.nlc] in pyproject.toml, and -k: only the selected items run, and the nlc run is narrowed to them
    rmSync(join(repo, "nlc.config.json"));
    writeFileSync(join(repo, "pyproject.toml"), '[tool.nlc]\nbackends = ["py:naive_delta_planted.py:dq_scaled"]\nprofile = "quick"\n');
    const narrowed = pytest(["-k", "delta/forward and not gated and not frozen", "--nlc-report", "reports/narrowed.json", "-v"]);
    expect(narrowed.code === 0 ? 0 : narrowed.out).toBe(0);
    expect(narrowed.out).toMatch(/1 passed, \d+ deselected/);
    expect(narrowed.out).toContain("pyproject.toml::C5/py-dq_scaled/delta/forward PASSED");
    const ran = JSON.parse(readFileSync(join(repo, "reports", "narrowed.json"), "utf8")).checks.map((c: { id: string }) => c.id);
    expect(ran).toContain("C5/py-dq_scaled/delta/forward");
    expect(ran).not.toContain("C5/py-dq_scaled/delta/backward");

    // a run that tests nothing (no usable Python: every check skipped) fails pytest through its run item
    const nothing = pytest([], { NLC_TORCH_PYTHON: "/nonexistent/python" });
    expect(nothing.code).toBe(1);
    expect(nothing.out).toContain("FAILED pyproject.toml::run");
    expect(nothing.out).toContain("conformance: nothing ran: every selected check");

    // what is missing is named: no node on PATH, no nl-conformance installed
    const noNode = pytest([], { PATH: join(venv, "bin") });
    expect(noNode.code).not.toBe(0);
    expect(noNode.out).toContain("no 'node' on PATH");
    const bare = join(work, "bare");
    mkdirSync(bare);
    writeFileSync(join(bare, "nlc.config.json"), "{}");
    const notInstalled = sh([python, "-m", "pytest", "-p", "no:cacheprovider"], bare);
    expect(notInstalled.code).not.toBe(0);
    expect(notInstalled.out).toContain("nl-conformance is not installed");
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}, 600_000);

/**
 * The checks of rules a kernel does not implement are deselected as the report names them
 * (run.backends[].unimplemented, docs/spec/conformance.md#undeclared), not from nlc's printed
 * lines: the plugin from its source (-p), an `nlc` stand-in that lists three checks and, for the
 * run, copies a report written by runReport (one check passed, two of a rule the kernel does not
 * implement) and prints no `does not implement` line. Needs only pytest. Planted: the plugin
 * parsing the printed line (as it did), seen to fail it (the two checks "not in the run's report").
 */
test.skipIf(!has("pytest"))("pytest deselects the checks of rules the kernel does not implement, as the report's backends name them", () => {
  const work = mkdtempSync(join(tmpdir(), "nlc-pytest-unimpl-"));
  try {
    const PYB = "py:k.py:k";
    const pass = check("C5/py-k/delta/forward", "pass", { subject: { rule: "delta", backend: PYB } });
    const undeclared = (variant: string) => check(`C5/py-k/${variant}/forward`, "skip",
      { subject: { rule: "titans", ...(variant.endsWith(".frozen") ? { frozen: true } : {}), backend: PYB }, message: "not declared", details: UNDECLARED_DETAILS });
    const results = [pass, undeclared("titans"), undeclared("titans.frozen")];
    const defs = results.map((r) => ({ id: r.id }) as CheckDef);
    const request = { seed: 1, profile: "quick", filters: [], fixtureDirs: [], reportPath: null, names: CLI_NAMES } as RunRequest;
    const plan = { request, catalogue: { checks: defs, backends: () => [] }, defs, selected: new Set(defs.map((d) => d.id)) } as unknown as RunPlan;
    const outcome: RunOutcome = { results, backends: [{ name: PYB, available: true }], interrupt: null, warnings: [] };
    const report = join(work, "report.json");
    writeFileSync(report, JSON.stringify(runReport(plan, outcome, new Date())));
    const nlc = join(work, "nlc");
    writeFileSync(nlc, [
      `#!${PY}`, "import shutil, sys",
      "args = sys.argv[1:]",
      `if "--list" in args: print(${JSON.stringify(results.map((r) => r.id).join("\n"))})`,
      `else: shutil.copyfile(${JSON.stringify(report)}, args[args.index("--report") + 1]); print("conformance: 1 passed, 0 failed (0 fail, 0 vacuous, 0 error, 0 skipped)")`,
      "",
    ].join("\n"), { mode: 0o755 });
    const repo = join(work, "repo");
    mkdirSync(repo);
    writeFileSync(join(repo, "nlc.config.json"), JSON.stringify({ backends: [PYB] }));
    const r = sh([PY, "-m", "pytest", "-p", "no:cacheprovider", "-p", "pytest_nlc.plugin", "--nlc-bin", nlc, "-v"], repo,
      { PYTHONPATH: join(ROOT, "python", "pytest-nlc") });
    expect(r.code === 0 ? 0 : r.out).toBe(0);
    expect(r.out).toContain("nlc.config.json::C5/py-k/delta/forward PASSED");
    expect(r.out).toContain("nlc.config.json::run PASSED");
    expect(r.out).toMatch(/ 2 passed, 2 deselected /);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}, 120_000);

