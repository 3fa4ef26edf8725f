/**
 * Lattice's write variant decides whether v is read at all (encode writes k; similarity at d = 1
 * writes nothing). A kernel check that drew the variant only at random compared dv only where it
 * is zero at some seeds (C5/cpu-emu/lattice/chunks at seed 99: "never exercised in 6 cases: dv").
 * Every kernel check now runs each value of an enumerated hyperparameter as a fixed example on top
 * of its generated cases (docs/spec/conformance.md#enum-examples).
 */
import { expect, test } from "bun:test";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sampleRuleCaseSpecs } from "../cases/inner-case.ts";
import { otherEnumValues } from "../cases/rule-case.ts";
import { chunkExample } from "../conformance/kernel/native/abi-case.ts";
import { withEnumExamples } from "../cases/kernel-batch.ts";
import { ruleByKey } from "../src/rules/index.ts";
import { runEnv } from "./run-env.ts";

const ROOT = join(import.meta.dir, "..");

test("every other value of an enumerated hyperparameter, the rest of the case unchanged", () => {
  const lattice = ruleByKey("lattice");
  const [spec] = sampleRuleCaseSpecs(lattice, { d: [4, 4], seq_len: [8, 8] }, 1, 1);
  const others = otherEnumValues(lattice, spec!);
  expect(others.map((s) => s.hyper.variant).concat(spec!.hyper.variant).sort()).toEqual(["decode", "encode", "similarity"]);
  for (const o of others) expect({ ...o, hyper: { ...o.hyper, variant: spec!.hyper.variant! } } as unknown).toEqual(spec!);
  expect(otherEnumValues(ruleByKey("delta"), spec!)).toEqual([]);
  // the chunk check's examples: all three variants at d = 4 (similarity reads v there)
  const ex = withEnumExamples(lattice, false, chunkExample(lattice, 24));
  expect(ex.map((k) => k.base.hyper.variant).sort()).toEqual(["decode", "encode", "similarity"]);
  for (const k of ex) expect(k.base.d).toBe(4);
  expect(withEnumExamples(lattice, true, ex[0]!)).toHaveLength(1);
});

test("C5/cpu-emu/lattice/chunks at seed 99 exercises dv and passes (it was vacuous)", () => {
  const report = join(mkdtempSync(join(tmpdir(), "nlc-enum-")), "r.json");
  const r = Bun.spawnSync({
    cmd: [process.execPath, join(ROOT, "conformance", "cli.ts"), "--seed", "99", "--filter", "C5/cpu-emu/lattice/chunks", "--report", report],
    cwd: ROOT, env: runEnv(), stdout: "pipe", stderr: "pipe",
  });
  const checks = (JSON.parse(readFileSync(report, "utf8")) as { checks: { id: string; status: string; runs: number }[] }).checks;
  const c = checks.find((x) => x.id === "C5/cpu-emu/lattice/chunks")!;
  if (c.status === "skip") return; // no C++ compiler here: cpu-emu is not built
  expect(r.exitCode).toBe(0);
  expect(c.status).toBe("pass");
  expect(c.runs).toBe(9); // six generated cases and the three variants
}, 300_000);
