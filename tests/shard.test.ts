/** Sharding: a deterministic, balanced partition; CLI and NLC_SHARD; merging shard reports. */
import { expect, test } from "bun:test";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildCatalogue } from "../conformance/catalogue.ts";
import { catalogueSettings, ENV_NAMES } from "../conformance/plan.ts";
import { envOptions } from "../harness/collect.ts";
import { mergeReports } from "../harness/report-merge.ts";
import { validateReport } from "../harness/report.ts";
import { assignShards, estimates, loadTimes, parseShard } from "../harness/shard.ts";
import { ROOT } from "../paths.ts";
import { check, report } from "./synthetic-report.ts";

const defs = buildCatalogue(catalogueSettings({ fixtureDirs: [], names: ENV_NAMES })).checks;
const table = loadTimes();

test("parseShard: i/n with 1 <= i <= n; anything else names the text", () => {
  expect(parseShard("2/4")).toEqual({ index: 2, count: 4 });
  for (const bad of ["0/2", "3/2", "1/0", "x", "1/2/3", "-1/2"]) expect(() => parseShard(bad)).toThrow(`'${bad}'`);
  expect(envOptions({ NLC_SHARD: "1/3" }).shard).toEqual({ index: 1, count: 3 });
  expect(() => envOptions({ NLC_SHARD: "4/3" })).toThrow("NLC_SHARD=4/3");
});

test("every check lands on exactly one shard, batches stay together, and the same input gives the same partition", () => {
  for (const n of [1, 2, 3, 5]) {
    const at = assignShards(defs, n, table);
    expect(at.size).toBe(defs.length);
    expect([...at.values()].every((s) => s >= 1 && s <= n)).toBe(true);
    expect(assignShards([...defs].reverse(), n, table)).toEqual(at);
    for (const d of defs.filter((d) => d.kind === "delegated" && d.class === "C9")) expect(at.get(d.id)).toBe(at.get("C9/delta")!);
  }
});

test("shards are balanced by measured time: none exceeds the ideal share by more than the largest batch", () => {
  const est = estimates(defs, table);
  const total = [...est.values()].reduce((a, b) => a + b, 0);
  const units = new Map<string, number>();
  for (const d of defs) {
    const key = d.kind === "delegated" ? `${d.class} ${d.subject.backend}` : d.id;
    units.set(key, (units.get(key) ?? 0) + est.get(d.id)!);
  }
  const largest = Math.max(...units.values());
  for (const n of [2, 3, 4]) {
    const load = Array.from({ length: n }, () => 0);
    for (const [id, s] of assignShards(defs, n, table)) load[s - 1]! += est.get(id)!;
    expect(Math.max(...load)).toBeLessThanOrEqual(total / n + largest);
  }
});

function cli(...args: string[]) {
  const r = Bun.spawnSync({ cmd: [process.execPath, join(ROOT, "conformance", "cli.ts"), ...args], cwd: ROOT });
  return { code: r.exitCode, out: r.stdout.toString(), err: r.stderr.toString() };
}

test("--shard: the shards' lists are disjoint and together the whole selection; a bad shard is a usage error", () => {
  const all = cli("--list", "--filter", "C2,C8").out.trim().split("\n");
  const one = cli("--list", "--filter", "C2,C8", "--shard", "1/2").out.trim().split("\n");
  const two = cli("--list", "--filter", "C2,C8", "--shard", "2/2").out.trim().split("\n");
  expect(one.length).toBeGreaterThan(0);
  expect(two.length).toBeGreaterThan(0);
  expect(one.filter((id) => two.includes(id))).toEqual([]);
  expect([...one, ...two].sort()).toEqual([...all].sort());
  const bad = cli("--shard", "3/2", "--list");
  expect(bad.code).toBe(2);
  expect(bad.err).toContain("--shard '3/2'");
}, 120_000);

const SHARD_A = report([check("C2/a", "pass"), check("C5/b", "skip")], { shard: { index: 1, count: 2 }, backends: [{ name: "ref", available: true }, { name: "cpu-emu", available: false, reason: "not probed" }] });
const SHARD_B = report([check("C2/c", "fail"), check("C5/d", "pass")], { shard: { index: 2, count: 2 }, started: "2026-01-01T00:00:00.500Z", ended: "2026-01-01T00:00:03.000Z", backends: [{ name: "ref", available: true }, { name: "cpu-emu", available: true }] });

test("merge: one schema-valid report with every shard's checks, summed statuses and the run's span", () => {
  const m = mergeReports([{ path: "b.json", report: SHARD_B }, { path: "a.json", report: SHARD_A }]);
  validateReport(m);
  expect(m.checks.map((c) => c.id)).toEqual(["C2/a", "C2/c", "C5/b", "C5/d"]);
  expect(m.summary).toEqual({ pass: 2, fail: 1, vacuous: 0, skip: 1, error: 0 });
  expect(m.run.shard).toBeUndefined();
  expect([m.run.started, m.run.ended]).toEqual(["2026-01-01T00:00:00.000Z", "2026-01-01T00:00:03.000Z"]);
  expect(m.run.backends.find((b) => b.name === "cpu-emu")!.available).toBe(true);
});

test("merge CLI: writes the merged report; overlaps, other versions and missing shards exit 2 naming the files", () => {
  const dir = mkdtempSync(join(tmpdir(), "nlc-merge-"));
  const f = (name: string, r: unknown) => { const p = join(dir, name); writeFileSync(p, JSON.stringify(r)); return p; };
  const a = f("a.json", SHARD_A), b = f("b.json", SHARD_B);
  const out = join(dir, "merged.json");
  const ok = cli("merge", a, b, "--out", out);
  expect(ok.code).toBe(0);
  expect(JSON.parse(readFileSync(out, "utf8")).checks.length).toBe(4);
  const overlap = f("overlap.json", report([check("C2/a", "pass")], { shard: { index: 2, count: 2 } }));
  const r1 = cli("merge", a, overlap, "--out", out);
  expect(r1.code).toBe(2);
  expect(r1.err).toContain("C2/a is in both");
  expect(r1.err).toContain("overlap.json");
  const other = f("other.json", { ...SHARD_B, run: { ...SHARD_B.run, version: "9.9.9" } });
  const r2 = cli("merge", a, other, "--out", out);
  expect(r2.code).toBe(2);
  expect(r2.err).toContain("other.json: run.version");
  const r3 = cli("merge", a, "--out", out);
  expect(r3.code).toBe(2);
  expect(r3.err).toContain("shard 2 of 2 missing");
  const r4 = cli("merge", a, join(dir, "absent.json"), "--out", out);
  expect(r4.code).toBe(2);
  expect(r4.err).toContain("absent.json");
  expect(cli("merge", a, b).code).toBe(2);
  const partial = f("partial.json", { ...SHARD_B, partial: true });
  const r5 = cli("merge", a, partial, "--out", out);
  expect(r5.code).toBe(2);
  expect(r5.err).toContain("partial.json is the partial report");
}, 120_000);
