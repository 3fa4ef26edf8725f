/**
 * `npm run conformance` runs delegated checks (kernel children, the cross-check) in worker threads
 * beside the in-process checks; the report is the serial run's (NLC_SERIAL=1) apart from timings.
 */
import { expect, test } from "bun:test";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildCatalogue } from "../conformance/catalogue.ts";
import { catalogueSettings, ENV_NAMES } from "../conformance/plan.ts";
import { batchOf, delegatedBatches, InlineWork, mergeBackendInfo, workersPay } from "../conformance/parallel.ts";
import { ROOT } from "../paths.ts";
import { probeTorchSync } from "../oracle/torch-bridge.ts";

test("delegated checks are batched by their own batch, else class (py: backends one each), in catalogue order; nothing else is", () => {
  const defs = buildCatalogue(catalogueSettings({ fixtureDirs: [], names: ENV_NAMES })).checks;
  const batches = delegatedBatches(defs);
  for (const [key, ids] of batches) {
    expect(ids).toEqual(defs.filter((d) => d.kind === "delegated" && batchOf(d) === key).map((d) => d.id));
  }
  expect(batches.get("C5")!.length).toBeGreaterThan(50);
  expect(batches.get("C9")!.length).toBeGreaterThan(50);
  expect([...batches.values()].flat().length).toBe(defs.filter((d) => d.kind === "delegated").length);
});

test("a worker builds only the generators of its job's checks: they make every one of them, and fewer than the catalogue", () => {
  const settings = catalogueSettings({ fixtureDirs: [], names: ENV_NAMES });
  const full = buildCatalogue(settings);
  const batches = delegatedBatches(full.checks);
  expect(batches.size).toBeGreaterThan(1);
  for (const ids of batches.values()) {
    const part = new Set(buildCatalogue(settings, full.generatorsOf(ids)).checks.map((c) => c.id));
    expect(ids.filter((id) => !part.has(id))).toEqual([]);
    expect(part.size).toBeLessThan(full.checks.length);
  }
  // the generators partition the catalogue, in its order
  const keys = full.generatorsOf(full.checks.map((c) => c.id));
  expect(keys.flatMap((k) => buildCatalogue(settings, [k]).checks.map((c) => c.id))).toEqual(full.checks.map((c) => c.id));
  expect(() => full.generatorsOf(["no/such/check"])).toThrow("no check no/such/check in the catalogue");
});

test("a single lane of work (one batch, nothing in-process) runs without a worker thread", () => {
  const defs = buildCatalogue(catalogueSettings({ fixtureDirs: [], names: ENV_NAMES })).checks;
  const kernel = defs.filter((d) => d.id.startsWith("C5/cpu-emu/delta/"));
  expect(workersPay(kernel, delegatedBatches(kernel))).toBe(false);
  const mixed = defs.filter((d) => d.id.startsWith("C5/cpu-emu/delta/") || d.id.startsWith("C8/delta"));
  expect(workersPay(mixed, delegatedBatches(mixed))).toBe(true);
});

test("the report lists a worker's probe of a backend instead of 'not probed'", () => {
  const main = [{ name: "ref", available: true }, { name: "cpu-emu", available: false, reason: "not probed: no C5 check ran in this run" }];
  const worker = [{ name: "ref", available: true }, { name: "cpu-emu", available: true, device: "emu" }];
  expect(mergeBackendInfo(main, [worker])).toEqual([{ name: "ref", available: true }, { name: "cpu-emu", available: true, device: "emu" }]);
  // A py: backend whose checks ran in a worker: available, as a serial run says.
  const py = "py:examples/py-kernels/naive_delta.py:naive_delta";
  const mainPy = [{ name: py, available: false, reason: "not run: no check of this backend ran" }];
  const workerPy = [{ name: py, available: true, device: "PyTorch kernel host" }];
  expect(mergeBackendInfo(mainPy, [workerPy])).toEqual(workerPy);
});

function run(report: string, serial: boolean) {
  const env = { ...process.env, NLC_SERIAL: serial ? "1" : "0" };
  // In-process checks, one kernel child's batch and the cross-check's: three lanes, so workers run.
  const r = Bun.spawnSync({ cmd: [process.execPath, join(ROOT, "conformance", "cli.ts"), "--filter", "C8/delta,C5/cpu-emu/delta/forward,C5/cpu-emu/delta/backward,C9/delta", "--report", report], cwd: ROOT, env });
  expect(r.exitCode).toBe(0);
  const doc = JSON.parse(readFileSync(report, "utf8"));
  return { checks: doc.checks.map(({ ms: _ms, ...c }: { ms: number }) => c), backends: doc.run.backends };
}

test("with worker threads the report is the serial run's, apart from timings", () => {
  const dir = mkdtempSync(join(tmpdir(), "nlc-par-"));
  const par = run(join(dir, "p.json"), false), ser = run(join(dir, "s.json"), true);
  expect(par.checks.length).toBeGreaterThan(4);
  expect(par).toEqual(ser);
}, 300_000);

test("in-process checks are shared from the back by estimated time: half an equal split, at least one check, none below the minimum", () => {
  const defs = buildCatalogue(catalogueSettings({ fixtureDirs: [], names: ENV_NAMES })).checks.filter((d) => d.kind !== "delegated").slice(0, 10);
  const est = new Map(defs.map((d, i) => [d.id, i === 9 ? 500 : 100]));
  const work = new InlineWork(defs, est);
  expect(work.remainingMs()).toBe(1400);
  expect(work.front()!.id).toBe(defs[0]!.id);
  // 1300 ms left for two threads: a share of at least 325 ms from the back, whole checks
  expect(work.share(2, 0).map((d) => d.id)).toEqual([defs[9]!.id]);
  expect(work.share(2, 0).map((d) => d.id)).toEqual(defs.slice(7, 9).map((d) => d.id));
  expect(work.share(2, 1000)).toEqual([]);
  const rest: string[] = [];
  for (let d = work.front(); d !== undefined; d = work.front()) rest.push(d.id);
  expect(rest).toEqual(defs.slice(1, 7).map((d) => d.id));
  expect(work.share(1, 0)).toEqual([]);
});

test("in-process checks shared with a worker thread give the serial run's report", () => {
  const dir = mkdtempSync(join(tmpdir(), "nlc-share-"));
  const go = (serial: boolean) => {
    const report = join(dir, `${serial}.json`);
    const r = Bun.spawnSync({ cmd: [process.execPath, join(ROOT, "conformance", "cli.ts"), "--filter", "C2/delta,C3/delta,C8/delta,C4/delta", "--report", report], cwd: ROOT,
      env: { ...process.env, NLC_SERIAL: serial ? "1" : "0", NLC_SHARE_MIN_MS: "0" } });
    expect(r.exitCode).toBe(0);
    return (JSON.parse(readFileSync(report, "utf8")).checks as { ms: number }[]).map(({ ms: _ms, ...c }) => c);
  };
  const shared = go(false), serial = go(true);
  expect(shared.length).toBeGreaterThan(20);
  expect(shared).toEqual(serial);
}, 300_000);

/**
 * Backends named by --backend only (not in the environment): each one's batch goes to a worker
 * lane, which must adopt the run's settings before it builds its catalogue. A lane that does not
 * lacks those checks and fails; the main thread then runs them, so only the run's own stderr line
 * and the report's run.warnings show it (docs/spec/conformance.md#run-warnings).
 * A py: kernel and cpu-bf16 (cpu-bf16 alone without PyTorch).
 */
test("worker lanes run the batches of --backend backends (py: and native) with the run's settings", () => {
  const report = join(mkdtempSync(join(tmpdir(), "nlc-par-backend-")), "r.json");
  const py = probeTorchSync().available ? [["py:examples/py-kernels/naive_delta.py:naive_delta", "C5/py-naive_delta/delta/forward"]] : [];
  const backends = [...py, ["cpu-bf16", "C5/cpu-bf16/delta/forward"]];
  const ids = backends.map(([, id]) => id!);
  const env: Record<string, string | undefined> = { ...process.env, NLC_SERIAL: "0", NLC_BACKENDS: undefined, NLC_PY_BACKENDS: undefined };
  const r = Bun.spawnSync({
    cmd: [process.execPath, join(ROOT, "conformance", "cli.ts"), ...backends.flatMap(([b]) => ["--backend", b!]), "--profile", "quick",
      "--filter", [...ids, "C8/delta"].join(","), "--report", report], cwd: ROOT, env, stderr: "pipe", stdout: "pipe",
  });
  expect(r.stderr.toString()).not.toContain("a check worker failed");
  expect(r.exitCode).toBe(0);
  const doc = JSON.parse(readFileSync(report, "utf8")) as { run: { warnings?: string[] }; checks: { id: string; status: string }[] };
  expect(doc.run.warnings).toBeUndefined();
  const checks = doc.checks;
  for (const id of ids) expect(checks.find((c) => c.id === id)?.status).toBe("pass");
}, 600_000);
