/**
 * A run that tests nothing fails (docs/spec/conformance.md#nothing-ran), a run that does not pass
 * never replaces a report that passed, and the settings record: the config file is validated with
 * errors naming the file, the field and the nearest known key; flags override it; the nearest-name
 * function behind every "did you mean" message.
 */
import { expect, test } from "bun:test";
import { mkdtempSync, readFileSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CheckDef, CheckResult } from "../harness/check.ts";
import { nearest } from "../harness/nearest.ts";
import { isGreen, writeReport } from "../harness/report.ts";
import { ROOT } from "../paths.ts";
import type { RunOutcome } from "../conformance/parallel.ts";
import { CLI_NAMES, planRun, UsageError, type RunPlan, type RunRequest } from "../conformance/plan.ts";
import { failedPath, nothingRan, writeRunReport } from "../conformance/run-report.ts";
import { parseCommandLine, readConfig, runSettings } from "../conformance/settings.ts";
import { check, report } from "./synthetic-report.ts";

const tmp = () => mkdtempSync(join(tmpdir(), "nlc-nothing-ran-"));

function planOf(results: CheckResult[], req: Partial<RunRequest> = {}): RunPlan {
  const defs = results.map((r) => ({ id: r.id, class: r.class, subject: r.subject }) as unknown as CheckDef);
  const request = { seed: 1, profile: "quick", filters: [], fixtureDirs: [], reportPath: null, names: CLI_NAMES, ...req } as RunRequest;
  return { request, catalogue: { checks: defs, backends: () => [] }, defs, selected: new Set(defs.map((d) => d.id)) } as unknown as RunPlan;
}

const outcome = (results: CheckResult[], backends: RunOutcome["backends"] = []): RunOutcome => ({ results, backends, interrupt: null, warnings: [] });
const PY = "py:kernel.py:k";
const kernel = (rule: string, status: CheckResult["status"], message?: string) =>
  check(`C5/py-k/${rule}/forward`, status, { subject: { rule, backend: PY }, ...(message ? { message } : {}) });

test("every selected check skipped: the run tested nothing, naming the skips' reasons; --allow-skipped accepts it", () => {
  const results = [check("C9/delta/x", "skip", { message: "python cannot be started" }), check("C9/delta/y", "skip", { message: "python cannot be started" })];
  expect(nothingRan(planOf(results), outcome(results))).toEqual(["nothing ran: every selected check (2) was skipped: python cannot be started"]);
  expect(nothingRan(planOf(results, { allowSkipped: true }), outcome(results))).toEqual([]);
  // one check that ran is enough
  const mixed = [...results, check("C2/delta/z", "pass")];
  expect(nothingRan(planOf(mixed), outcome(mixed))).toEqual([]);
});

test("a backend named explicitly that ran no check fails with its reason, though other checks passed", () => {
  const results = [check("C2/delta/z", "pass"), kernel("delta", "skip", "backend unavailable")];
  const plan = planOf(results, { explicitBackends: [PY] });
  const why = nothingRan(plan, outcome(results, [{ name: PY, available: false, reason: "ImportError: no triton" }]));
  expect(why).toEqual([`nothing ran: backend ${PY} ran no check: unavailable (ImportError: no triton)`]);
  // its checks skipped for another reason: named as such
  expect(nothingRan(plan, outcome(results, [{ name: PY, available: true }]))).toEqual([`nothing ran: backend ${PY} ran no check: its 1 checks were skipped (backend unavailable)`]);
  // not named: not required to run
  expect(nothingRan(planOf(results), outcome(results))).toEqual([]);
  // a kernel check that ran
  const ran = [kernel("delta", "fail"), kernel("titans", "skip")];
  expect(nothingRan(planOf(ran, { explicitBackends: [PY] }), outcome(ran))).toEqual([]);
});

test("the config's require: each entry must select a check that passed; one whose checks ran and failed is not 'nothing ran'", () => {
  const results = [kernel("delta", "pass"), kernel("titans", "fail"), kernel("mamba2", "skip", "not declared")];
  const plan = (require: string[]) => planOf(results, { require, configPath: "nlc.config.json" });
  expect(nothingRan(plan(["delta"]), outcome(results))).toEqual([]);
  expect(nothingRan(plan(["titans", "gated_delta", "mamba2"]), outcome(results))).toEqual([
    "required 'titans' (nlc.config.json require) did not pass: its 1 check that ran passed none (1 fail)",
    "nothing ran: required 'gated_delta' (nlc.config.json require) selects no check of this run",
    "nothing ran: required 'mamba2' (nlc.config.json require): its 1 checks were skipped (not declared)",
  ]);
});

test("a run that does not pass is written beside a report that passed, never over it; a passing run clears it", () => {
  const dir = tmp();
  const target = join(dir, "conformance.json");
  const passing = [check("C2/a", "pass")];
  writeReport(report(passing), target);
  const before = readFileSync(target, "utf8");
  const log: string[] = [];
  const failing = [check("C2/a", "fail")];
  const w = writeRunReport(planOf(failing, { reportPath: target }), outcome(failing), new Date(), (s) => log.push(s));
  expect(w.green).toBe(false);
  expect(w.path).toBe(failedPath(target));
  expect(failedPath(target)).toBe(join(dir, "conformance.failed.json"));
  expect(readFileSync(target, "utf8")).toBe(before);
  expect(log.join("\n")).toContain(`(this run did not pass: ${target}, which passed, is left as it was)`);
  // an empty run (nothing ran) is not green either
  const skipped = [check("C2/a", "skip")];
  expect(writeRunReport(planOf(skipped, { reportPath: target }), outcome(skipped), new Date(), () => {}, ["every selected check (1) was skipped"]).path).toBe(failedPath(target));
  expect(readFileSync(target, "utf8")).toBe(before);
  // a passing run replaces the report and removes the failed one beside it
  const p = writeRunReport(planOf(passing, { reportPath: target }), outcome(passing), new Date(), () => {});
  expect(p.path).toBe(target);
  expect(existsSync(failedPath(target))).toBe(false);
  // over a report that failed, a failing run is written where it was asked to be
  writeReport(report(failing), target);
  expect(writeRunReport(planOf(failing, { reportPath: target }), outcome(failing), new Date(), () => {}).path).toBe(target);
});

test("a report in which every check was skipped is not a passing one: a later failing run replaces it", () => {
  const dir = tmp();
  const target = join(dir, "conformance.json");
  const skipped = [check("C2/a", "skip", { message: "python cannot be started" })];
  expect(isGreen(report(skipped))).toBe(false);
  expect(isGreen(report(skipped), true)).toBe(true); // --allow-skipped
  writeReport(report(skipped), target);
  const failing = [check("C2/a", "fail")];
  const w = writeRunReport(planOf(failing, { reportPath: target }), outcome(failing), new Date(), () => {});
  expect(w.path).toBe(target);
  expect(existsSync(failedPath(target))).toBe(false);
  // an all-skipped run accepted by --allow-skipped is green
  expect(writeRunReport(planOf(skipped, { reportPath: target, allowSkipped: true }), outcome(skipped), new Date(), () => {}).green).toBe(true);
});

test("a config's rule or filter that selects nothing names the config file and its field, not the option", () => {
  const dir = tmp();
  writeFileSync(join(dir, "nlc.config.json"), JSON.stringify({ rule: "detla", filter: ["C2"] }));
  const planErr = (argv: string[]) => {
    try {
      planRun({ ...runSettings(parseCommandLine(argv).values, dir), reportPath: null });
    } catch (e) {
      expect(e).toBeInstanceOf(UsageError);
      return (e as Error).message;
    }
    throw new Error("no error");
  };
  expect(planErr([])).toStartWith("nlc.config.json rule 'detla': no check of that rule; did you mean 'delta'?");
  expect(planErr(["--rule", "detla"])).toStartWith("--rule 'detla': no check of that rule");
  writeFileSync(join(dir, "nlc.config.json"), JSON.stringify({ filter: ["C2/no-such"] }));
  expect(planErr([])).toBe("nlc.config.json filter: 'C2/no-such' matches no check (try --list)");
}, 60_000);

test("the config file: validated, errors name the file, the field and the nearest known key; flags override it", () => {
  const dir = tmp();
  const write = (v: unknown) => writeFileSync(join(dir, "nlc.config.json"), JSON.stringify(v));
  const err = (f: () => unknown) => {
    try {
      f();
    } catch (e) {
      expect(e).toBeInstanceOf(UsageError);
      return (e as Error).message;
    }
    throw new Error("no error");
  };
  expect(readConfig(null, dir)).toBeNull();
  write({ backends: ["py:k.py:k"], chunksize: 3 });
  expect(err(() => readConfig(null, dir))).toBe("nlc.config.json: unknown key 'chunksize' (known keys: $schema, backends, profile, seed, filter, rule, min-power, report, fixtures, require, allow-skipped)");
  write({ backend: ["py:k.py:k"] });
  expect(err(() => readConfig(null, dir))).toBe("nlc.config.json: unknown key 'backend'; did you mean 'backends'?");
  write({ profile: "fast" });
  expect(err(() => readConfig(null, dir))).toBe(`nlc.config.json: profile must be equal to one of the allowed values ("quick", "default", "deep", "regime")`);
  write({ seed: "1" });
  expect(err(() => readConfig(null, dir))).toBe("nlc.config.json: seed must be integer");
  writeFileSync(join(dir, "nlc.config.json"), "{ backends: [] }");
  expect(err(() => readConfig(null, dir))).toStartWith("nlc.config.json: not valid JSON");
  expect(err(() => readConfig("other.json", dir))).toBe("other.json: no such file");

  write({ profile: "quick", seed: 5, filter: ["C2"], "min-power": "1%", require: ["delta"], "allow-skipped": true, report: "out/r.json" });
  const s = runSettings(parseCommandLine([]).values, dir);
  expect([s.profile, s.seed, s.filters, s.minPower, s.require, s.allowSkipped, s.reportPath]).toEqual(["quick", 5, ["C2"], 0.01, ["delta"], true, "out/r.json"]);
  const f = runSettings(parseCommandLine(["--profile", "deep", "--seed", "2", "--filter", "C3"]).values, dir);
  expect([f.profile, f.seed, f.filters]).toEqual(["deep", 2, ["C3"]]);
  // no config, no --report: the report goes under the directory the command runs in
  expect(runSettings(parseCommandLine([]).values, tmp()).reportPath).toStartWith(tmpdir());
  expect(runSettings(parseCommandLine([]).values, ROOT).reportPath).toBe(join(ROOT, "reports", "conformance.json"));
  // a lib: path is made absolute (its child runs elsewhere); py: backends named alone select their own checks
  write({ backends: ["lib:build/libk.so"] });
  expect(runSettings(parseCommandLine([]).values, dir).backends).toEqual([`lib:${join(dir, "build", "libk.so")}`]);
  write({ backends: ["py:k.py:k"] });
  expect(runSettings(parseCommandLine([]).values, dir).filters).toEqual(["C5/py-k/"]);
  // --rule narrows them to that rule of the kernel, not the suite's checks of the rule
  expect(runSettings(parseCommandLine(["--rule", "delta"]).values, dir).filters).toEqual(["C5/py-k/"]);
  // a backend string of the config names its checks with @<name> as --backend does
  write({ backends: ["py:k.py:k@k.v2"] });
  expect(runSettings(parseCommandLine([]).values, dir).filters).toEqual(["C5/py-k.v2/"]);
  write({ backends: ["py:k.py:k"] });
  expect(runSettings(parseCommandLine(["--filter", "C2"]).values, dir).filters).toEqual(["C2"]);
  expect(err(() => parseCommandLine(["--profle", "quick"]))).toContain("did you mean --profile?");
});

test("nearest: a misspelt name finds its key; an unrelated one finds none", () => {
  const keys = ["rules", "dtype", "layout", "chunk_size", "state_layout", "gated_delta", "delta", "titans"];
  expect(nearest("chunksize", keys)).toBe("chunk_size");
  expect(nearest("chunk_sise", keys)).toBe("chunk_size");
  expect(nearest("layuot", keys)).toBe("layout");
  expect(nearest("gated-delta", keys)).toBe("gated_delta");
  expect(nearest("Titan", keys)).toBe("titans");
  expect(nearest("foo", keys)).toBeNull();
  expect(nearest("moneta", keys)).toBeNull();
});

test("a typo'd --rule names the nearest rule key", () => {
  const r = Bun.spawnSync({ cmd: [process.execPath, join(ROOT, "conformance", "cli.ts"), "--rule", "gated-delta", "--list"], cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  expect(r.exitCode).toBe(2);
  expect(r.stderr.toString()).toContain("--rule 'gated-delta': no check of that rule; did you mean 'gated_delta'?");
});

test("--summary of a report in which every check was skipped exits 1, unless --allow-skipped", () => {
  const dir = tmp();
  const path = join(dir, "r.json");
  writeReport(report([check("C9/a", "skip"), check("C9/b", "skip")]), path);
  const run = (...args: string[]) => Bun.spawnSync({ cmd: [process.execPath, join(ROOT, "conformance", "cli.ts"), "--summary", path, ...args], cwd: dir, stdout: "pipe", stderr: "pipe" });
  const strict = run();
  expect(strict.exitCode).toBe(1);
  expect(strict.stderr.toString()).toContain("nothing ran: every check of");
  expect(run("--allow-skipped").exitCode).toBe(0);
});

test("a directory with no config file: a run, --list, --summary and a sweep need none (only a named --config must exist)", () => {
  const dir = tmp();
  const cli = (...args: string[]) => {
    const r = Bun.spawnSync({ cmd: [process.execPath, join(ROOT, "conformance", "cli.ts"), ...args], cwd: dir, stdout: "pipe", stderr: "pipe" });
    return { code: r.exitCode, out: r.stdout.toString() + r.stderr.toString() };
  };
  const check = "C0/op/GateScale";
  expect(cli("--list", "--filter", check)).toEqual({ code: 0, out: `${check}\n` });
  const run = cli("--filter", check);
  expect(run.out).toContain("conformance: 1 passed, 0 failed");
  expect(run.code).toBe(0);
  expect(existsSync(join(dir, "reports", "conformance.json"))).toBe(true);
  expect(cli("--summary").code).toBe(0);
  expect(cli("sweep", "--seeds", "1", "--filter", check, "--jobs", "1").code).toBe(0);
  const named = cli("--config", "nlc.config.json", "--list");
  expect(named.code).toBe(2);
  expect(named.out).toContain("nlc.config.json: no such file");
  expect(existsSync(join(dir, "nlc.config.json"))).toBe(false);
}, 120_000);
