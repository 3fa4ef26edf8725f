/**
 * A sweep's record carries evidence that its seeds ran different cases
 * (docs/spec/conformance.md#sweep-digests): per seed, a digest of every case the in-process property
 * checks generated. A sweep whose workers all ran seed 1 while recording the seeds asked for would
 * otherwise pass everything: here it is refused, and a real sweep's seeds digest differently.
 */
import { expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "../paths.ts";
import { buildCatalogue, matchesFilter } from "../conformance/catalogue.ts";
import { catalogueSettings, ENV_NAMES } from "../conformance/plan.ts";
import { probeTorchSync } from "../oracle/torch-bridge.ts";
import { formatSweep, mergeSweeps, repeatedSeeds, sweepClean, sweepSeed, SWEEP_FORMAT, SweepTally, type Sweep } from "../harness/sweep.ts";

const FILTER = ["C0/op/Add", "C0/op/Mul"];

function sweepOf(seedRan: (asked: number) => number, asked: number[]): Sweep {
  const defs = buildCatalogue(catalogueSettings({ fixtureDirs: [], names: ENV_NAMES })).checks.filter((c) => matchesFilter(c, FILTER));
  const selected = new Set(defs.map((d) => d.id));
  const tally = new SweepTally(defs);
  for (const seed of asked) {
    const r = sweepSeed(defs, seedRan(seed), "quick", selected);
    for (const x of r.results) tally.add(seed, x);
    tally.addDigest(seed, r.digest);
  }
  return {
    format: SWEEP_FORMAT,
    run: { version: "t", revision: null, profile: "quick", filter: FILTER.join(","), seeds: tally.seeds(), started: "", ended: "", case_digests: tally.caseDigests() },
    checks: tally.checks(),
  };
}

test("a sweep whose seeds all ran seed 1 is refused, naming the seeds; one that ran its seeds is clean", () => {
  const honest = sweepOf((s) => s, [1, 2, 3]);
  expect(honest.checks.every((c) => c.counts.pass === 3)).toBe(true);
  expect(repeatedSeeds(honest.run.case_digests)).toEqual([]);
  expect(sweepClean(honest)).toBe(true);
  const digests = Object.values(honest.run.case_digests!);
  expect(new Set(digests.map((d) => d.digest)).size).toBe(3);
  expect(digests.every((d) => d.cases > 0)).toBe(true);

  const stuck = sweepOf(() => 1, [1, 2, 3]);
  // every verdict passes, and the seeds asked for are recorded: only the digests tell
  expect(stuck.checks.every((c) => c.counts.pass === 3)).toBe(true);
  expect(stuck.run.seeds).toEqual([1, 2, 3]);
  expect(repeatedSeeds(stuck.run.case_digests)).toEqual([[1, 2], [1, 3]]);
  expect(sweepClean(stuck)).toBe(false);
  expect(formatSweep(stuck)).toContain("2 seeds generated exactly the cases of an earlier seed (2 as 1, 3 as 1)");
  // merging keeps the evidence: two parts that each ran seed 1 are refused together
  const a = sweepOf(() => 1, [1]), b = sweepOf(() => 1, [2]);
  expect(sweepClean(mergeSweeps([{ path: "a", sweep: a }, { path: "b", sweep: b }]))).toBe(false);
});

test("the sweep command records a digest per seed and exits 0 when its seeds differ", () => {
  const dir = mkdtempSync(join(tmpdir(), "nlc-sweep-digest-"));
  try {
    const out = join(dir, "s.json");
    const p = Bun.spawnSync({
      cmd: [process.execPath, "conformance/cli.ts", "sweep", "--seeds", "1..2", "--profile", "quick", "--jobs", "1", "--out", out, ...FILTER.flatMap((f) => ["--filter", f])],
      cwd: ROOT, stdout: "pipe", stderr: "pipe",
    });
    expect(p.exitCode).toBe(0);
    const s = JSON.parse(readFileSync(out, "utf8")) as Sweep;
    const d = s.run.case_digests!;
    expect(Object.keys(d)).toEqual(["1", "2"]);
    expect(d["1"]!.digest).not.toBe(d["2"]!.digest);
    expect(p.stdout.toString()).toContain("cases digested at 2 of 2 seeds");
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 120_000);

test("checks run in a child process (C5 on cpu-emu) report their cases' digest too", () => {
  const dir = mkdtempSync(join(tmpdir(), "nlc-sweep-digest-c5-"));
  try {
    const out = join(dir, "s.json");
    const p = Bun.spawnSync({
      cmd: [process.execPath, "conformance/cli.ts", "sweep", "--seeds", "1..2", "--profile", "quick", "--jobs", "1", "--out", out, "--filter", "C5/cpu-emu/delta/forward"],
      cwd: ROOT, stdout: "pipe", stderr: "pipe",
    });
    const s = JSON.parse(readFileSync(out, "utf8")) as Sweep;
    if (s.checks[0]!.counts.skip > 0) return; // no C++ compiler here: cpu-emu is not built
    expect(p.exitCode).toBe(0);
    const d = s.run.case_digests!;
    expect(d["1"]!.cases).toBeGreaterThan(0);
    expect(d["1"]!.digest).not.toBe(d["2"]!.digest);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 120_000);

test.skipIf(!probeTorchSync().available)("py: kernel checks (their own child process) report their cases' digest too", () => {
  const dir = mkdtempSync(join(tmpdir(), "nlc-sweep-digest-py-"));
  try {
    const out = join(dir, "s.json");
    const p = Bun.spawnSync({
      cmd: [process.execPath, "conformance/cli.ts", "sweep", "--seeds", "1..2", "--profile", "quick", "--jobs", "1", "--out", out,
        "--filter", "C5/py-naive_delta/delta/forward"],
      cwd: ROOT, stdout: "pipe", stderr: "pipe", env: { ...process.env, NLC_PY_BACKENDS: "py:examples/py-kernels/naive_delta.py:naive_delta" },
    });
    expect(p.exitCode).toBe(0);
    const d = (JSON.parse(readFileSync(out, "utf8")) as Sweep).run.case_digests!;
    expect(d["1"]!.cases).toBeGreaterThan(0);
    expect(d["1"]!.digest).not.toBe(d["2"]!.digest);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 120_000);
