/**
 * The sweep (docs/spec/conformance.md#sweeps): seed lists, seed shards, the per-check tally and
 * its lines, merging sweeps over disjoint seeds, and the command end to end.
 */
import { expect, test } from "bun:test";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { formatSweep, mergeSweeps, parseSeeds, seedShard, sweepClean, SWEEP_FORMAT, SweepTally, type Sweep } from "../harness/sweep.ts";
import { seedVerdict } from "../conformance/sweep.ts";
import { ROOT } from "../paths.ts";
import { probeTorchSync } from "../oracle/torch-bridge.ts";

test("seed lists: ranges, lists and mixes; bad text names itself", () => {
  expect(parseSeeds("1..5")).toEqual([1, 2, 3, 4, 5]);
  expect(parseSeeds("9,2..3,2")).toEqual([2, 3, 9]);
  expect(() => parseSeeds("5..1")).toThrow("'5..1'");
  expect(() => parseSeeds("1-4")).toThrow("'1-4'");
});

test("seed shards partition the list", () => {
  const seeds = parseSeeds("1..10");
  const parts = [1, 2, 3].map((index) => seedShard(seeds, { index, count: 3 }));
  expect(parts[0]).toEqual([1, 4, 7, 10]);
  expect(parts.flat().sort((a, b) => a - b)).toEqual(seeds);
});

function sweepOf(seeds: number[], bad: Record<number, "fail" | "vacuous">): Sweep {
  const t = new SweepTally([{ id: "C2/x", class: "C2" }, { id: "C3/y", class: "C3" }]);
  for (const s of seeds) {
    t.add(s, { id: "C2/x", status: bad[s] ?? "pass", message: bad[s] ? `broken at ${s}` : undefined, replay: `npm run conformance -- --replay C2/x:${s}0:1`, ms: 1 });
    t.add(s, { id: "C3/y", status: "skip", message: "no backend", replay: "", ms: 0 });
  }
  return { format: SWEEP_FORMAT, run: { version: "0", revision: "abc", profile: "default", filter: null, seeds: t.seeds(), started: "a", ended: "b" }, checks: t.checks() };
}

test("the lines name each check with non-pass verdicts, its first seed and replay; skips are not failures", () => {
  const text = formatSweep(sweepOf([1, 2, 3, 4], { 4: "vacuous", 2: "fail" }));
  expect(text).toContain("C2/x: 2 non-pass of 4 seeds (1 fail, 1 vacuous); first at seed 2: fail broken at 2");
  expect(text).toContain("replay: npm run conformance -- --replay C2/x:20:1");
  expect(text).not.toContain("C3/y:");
  expect(text).toContain("sweep: 4 seeds (1..4), 2 checks, 8 check runs: 2 non-pass (1 fail, 1 vacuous, 0 error) in 1 check; 2 pass, 4 skip");
});

test("sweeps over disjoint seeds merge; overlapping seeds or another revision are errors naming the files", () => {
  const a = sweepOf([1, 3], { 3: "fail" }), b = sweepOf([2, 4], { 2: "fail" });
  const m = mergeSweeps([{ path: "a.json", sweep: a }, { path: "b.json", sweep: b }]);
  expect(m.run.seeds).toEqual([1, 2, 3, 4]);
  const x = m.checks.find((c) => c.id === "C2/x")!;
  expect(x.counts).toEqual({ pass: 2, fail: 2, vacuous: 0, error: 0, skip: 0 });
  expect(x.nonpass.map((v) => v.seed)).toEqual([2, 3]);
  expect(() => mergeSweeps([{ path: "a.json", sweep: a }, { path: "c.json", sweep: sweepOf([3], {}) }])).toThrow("seed 3 is in both a.json and c.json");
  const other = { ...b, run: { ...b.run, revision: "def" } };
  expect(() => mergeSweeps([{ path: "a.json", sweep: a }, { path: "b.json", sweep: other }])).toThrow("b.json: run.revision");
});

function cli(...args: string[]) {
  const r = Bun.spawnSync({ cmd: [process.execPath, join(ROOT, "conformance", "cli.ts"), ...args], cwd: ROOT });
  return { code: r.exitCode, out: r.stdout.toString() + r.stderr.toString() };
}

test("end to end: two seeds of one check in one process, merged with a third", () => {
  const dir = mkdtempSync(join(tmpdir(), "nlc-sweep-"));
  const a = cli("sweep", "--seeds", "1..2", "--filter", "C8/chunk-gd/delta/c1-identity", "--out", join(dir, "a.json"), "--jobs", "1");
  expect(a.out).toContain("sweep: 2 seeds (1..2), 1 checks, 2 check runs: 0 non-pass");
  expect(a.code).toBe(0);
  const b = cli("sweep", "--seeds", "1..3", "--shard", "3/3", "--filter", "C8/chunk-gd/delta/c1-identity", "--out", join(dir, "b.json"), "--jobs", "1");
  expect(b.code).toBe(0);
  const m = cli("sweep-merge", join(dir, "a.json"), join(dir, "b.json"), "--out", join(dir, "m.json"));
  expect(m.code).toBe(0);
  const merged = JSON.parse(readFileSync(join(dir, "m.json"), "utf8")) as Sweep;
  expect(merged.run.seeds).toEqual([1, 2, 3]);
  expect(merged.checks[0]!.counts.pass).toBe(3);
}, 300_000);

test("a sweep with nothing to test fails as a run does, and no seed of it says 'all pass'", () => {
  const allSkip = sweepOf([1, 2], {});
  allSkip.checks = allSkip.checks.filter((c) => c.id === "C3/y");
  expect(sweepClean(allSkip)).toBe(false);
  expect(formatSweep(allSkip)).toContain("sweep: nothing ran: every check run (2) was skipped");
  expect(sweepClean(sweepOf([1, 2], {}))).toBe(true);
  expect(seedVerdict([{ id: "C3/y", status: "skip", message: "no backend" }])).toBe("nothing ran: every check (1) was skipped (no backend)");
  // end to end: the C9 cross-check without its interpreter skips at every seed
  const dir = mkdtempSync(join(tmpdir(), "nlc-sweep-empty-"));
  const r = Bun.spawnSync({
    cmd: [process.execPath, join(ROOT, "conformance", "cli.ts"), "sweep", "--seeds", "1..2", "--filter", "C9/titans", "--jobs", "1", "--out", join(dir, "s.json")],
    cwd: dir, env: { ...process.env, NLC_TORCH_PYTHON: join(dir, "no-python") }, stdout: "pipe", stderr: "pipe",
  });
  const out = r.stdout.toString() + r.stderr.toString();
  expect(out).not.toContain("all pass");
  expect(out).toMatch(/seed 1: nothing ran: every check \(\d+\) was skipped/);
  expect(r.exitCode).toBe(1);
}, 120_000);

test("usage errors exit 2 and name the input", () => {
  const r = cli("sweep", "--seeds", "x");
  expect(r.code).toBe(2);
  expect(r.out).toContain("--seeds 'x'");
  const f = cli("sweep", "--seeds", "1", "--filter", "no-such-check");
  expect(f.code).toBe(2);
  expect(f.out).toContain("no-such-check");
}, 120_000);

test.skipIf(!probeTorchSync().available)("sweep takes a run's selection: the config's py: backend, --rule narrowing it to that kernel's rule", () => {
  const dir = mkdtempSync(join(tmpdir(), "nlc-sweep-cfg-"));
  writeFileSync(join(dir, "nlc.config.json"), JSON.stringify({ backends: [`py:${join(ROOT, "examples", "py-kernels", "naive_delta.py")}:naive_delta`], profile: "quick" }));
  const r = Bun.spawnSync({ cmd: [process.execPath, join(ROOT, "conformance", "cli.ts"), "sweep", "--seeds", "1", "--rule", "delta", "--jobs", "1"], cwd: dir, stdout: "pipe", stderr: "pipe" });
  expect(r.exitCode === 0 ? 0 : r.stdout.toString() + r.stderr.toString()).toBe(0);
  const sweep = JSON.parse(readFileSync(join(dir, "reports", "sweep.json"), "utf8")) as Sweep;
  expect(sweep.run.profile).toBe("quick");
  // naive_delta implements no frozen read: those checks are not the sweep's (docs/spec/conformance.md#undeclared)
  expect(sweep.checks.map((c) => c.id)).toEqual(["forward", "backward", "contract"].map((k) => `C5/py-naive_delta/delta/${k}`));
  expect(r.stdout.toString()).toContain("sweep: 2 selected checks are of rules their kernels do not implement: not run");
  expect(sweep.checks.find((c) => c.id.endsWith("delta/backward"))!.counts.pass).toBe(1);
  const typo = Bun.spawnSync({ cmd: [process.execPath, join(ROOT, "conformance", "cli.ts"), "sweep", "--seeds", "1", "--backend", "cuda-emu"], cwd: dir, stdout: "pipe", stderr: "pipe" });
  expect(typo.exitCode).toBe(2);
  expect(typo.stderr.toString()).toContain("--backend 'cuda-emu': unknown backend");
}, 300_000);
