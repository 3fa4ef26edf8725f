/**
 * `npm run conformance` runs delegated checks (kernel children, the cross-check) in worker threads
 * beside the in-process checks; the report is the serial run's (NLC_SERIAL=1) apart from timings.
 */
import { expect, test } from "bun:test";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildCatalogue } from "../conformance/catalogue.ts";
import { batchOf, delegatedBatches, mergeBackendInfo, workersPay } from "../conformance/parallel.ts";
import { ROOT } from "../paths.ts";

test("delegated checks are batched by their own batch, else class (py: backends one each), in catalogue order; nothing else is", () => {
  const defs = buildCatalogue({ fixtureDirs: [] }).checks;
  const batches = delegatedBatches(defs);
  for (const [key, ids] of batches) {
    expect(ids).toEqual(defs.filter((d) => d.kind === "delegated" && batchOf(d) === key).map((d) => d.id));
  }
  expect(batches.get("C5")!.length).toBeGreaterThan(50);
  expect(batches.get("C9")!.length).toBeGreaterThan(50);
  expect([...batches.values()].flat().length).toBe(defs.filter((d) => d.kind === "delegated").length);
});

test("a single lane of work (one batch, nothing in-process) runs without a worker thread", () => {
  const defs = buildCatalogue({ fixtureDirs: [] }).checks;
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
