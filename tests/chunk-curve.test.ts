/**
 * The chunk-start GD curve property (docs/spec/chunk-forms.md#chunk-start-gd-curve): a paired
 * criterion over a batch of 64 independent cases whose false-alarm probability is stated; it passes
 * at the run seeds where the batch-mean criterion failed, and fails on planted forms.
 */
import { expect, test } from "bun:test";
import { chunkMatrixChecks, curveBatch, monotoneCase, type GdForm } from "../conformance/chunk/forms.ts";
import { runCheck } from "../harness/run.ts";
import { chunkStartGdForward } from "../src/rules/chunk-gd.ts";
import { ruleByKey } from "../src/rules/index.ts";

const checks = chunkMatrixChecks().filter((c) => c.id.endsWith("/monotone"));

test.each([17, 20, 21, 26])("every curve check passes at run seed %d (the batch mean fell between two chunk sizes there)", (seed) => {
  for (const def of checks) {
    const r = runCheck(def, { seed, profile: "default" });
    expect(`${def.id}: ${r.status} ${r.message ?? ""}`).toBe(`${def.id}: pass `);
  }
});

test("the stated false-alarm bound: fewer than 40 of 64 with a per-case rate of 0.05", () => {
  let tail = 0, c = 1; // P(at least 25 of 64 not farther), p = 0.05
  for (let j = 0; j <= 64; j++) {
    if (j > 0) c = (c * (64 - j + 1)) / j;
    if (j >= 25) tail += c * 0.05 ** j * 0.95 ** (64 - j);
  }
  expect(tail).toBeLessThan(1.8e-16);
});

const yaad = ruleByKey("yaad");
const own: GdForm = (d, c, C) => chunkStartGdForward(d, c.inp, c.state, c.cfg, C);

test("planted: a form whose error stops growing after C = 2 fails", () => {
  const saturating: GdForm = (d, c, C) => own(d, c, Math.min(C, 2));
  const r = monotoneCase(yaad, curveBatch(yaad, 7), saturating);
  expect(r.ok).toBe(false);
  expect(r.message).toContain("only 0 of 64 cases are farther");
  expect(monotoneCase(yaad, curveBatch(yaad, 7)).ok).toBe(true);
});

test("planted: a form that ignores C (the sequential rule) fails at C = 2", () => {
  const r = monotoneCase(yaad, curveBatch(yaad, 7), (d, c) => own(d, c, 1));
  expect(r.ok).toBe(false);
  expect(r.message).toContain("C = 2 equals the sequential rule");
});

test("the batch is 64 independent draws: no two cases share their seed", () => {
  const b = curveBatch(yaad, 3);
  expect(b.length).toBe(64);
  expect(new Set(b.map((s) => s.seed)).size).toBe(64);
});
