/**
 * Report subjects: the model's level pattern, the C5 phase and the dtype are fields (not only
 * parts of ids), `frozen` means the frozen read alone, and a failure's message and worst agree.
 */
import { expect, test } from "bun:test";
import { buildCatalogue } from "../conformance/catalogue.ts";
import { catalogueSettings, ENV_NAMES } from "../conformance/plan.ts";
import { fromComparison } from "../harness/check.ts";
import { compareTensors, TOL_FD } from "../oracle/compare.ts";

const checks = buildCatalogue(catalogueSettings({ fixtureDirs: [], names: ENV_NAMES })).checks;
const MODEL_ID = /^(C2\/model|C3|C4)\/[^/]+\/k\d\/([^/]+)$/;

test("subject: model checks name their level pattern in `levels`, never in `frozen`", () => {
  const model = checks.filter((c) => MODEL_ID.test(c.id));
  expect(model.length).toBeGreaterThan(100);
  for (const c of model) {
    expect({ id: c.id, levels: c.subject.levels }).toEqual({ id: c.id, levels: MODEL_ID.exec(c.id)![2] as never });
    expect({ id: c.id, frozen: c.subject.frozen }).toEqual({ id: c.id, frozen: undefined });
  }
  for (const c of checks.filter((c) => c.class === "C7" || c.id.startsWith("C9/model/"))) {
    expect({ id: c.id, frozen: c.subject.frozen }).toEqual({ id: c.id, frozen: undefined });
  }
});

test("subject: `frozen` is set exactly on the frozen-read variants (ids with .frozen)", () => {
  for (const c of checks.filter((c) => c.subject.frozen !== undefined)) {
    expect({ id: c.id, frozen: c.subject.frozen }).toEqual({ id: c.id, frozen: c.id.includes(".frozen") });
  }
});

test("subject: C5 rule checks carry their phase and dtype f32; gradient classes carry dtype", () => {
  const c5 = checks.filter((c) => c.class === "C5" && /\/(forward|backward|race|gpu-blocks|tape-e2e)$/.test(c.id));
  expect(c5.length).toBeGreaterThan(10);
  for (const c of c5) expect({ id: c.id, phase: c.subject.phase, dtype: c.subject.dtype }).toEqual({ id: c.id, phase: c.id.split("/").at(-1) as never, dtype: "f32" });
  // gradient classes run in f64; a check that runs both dtypes (C1 recompute parity) says f64+f32
  for (const c of checks.filter((c) => ["C1", "C2", "C3", "C8", "C9"].includes(c.class))) {
    expect({ id: c.id, dtype: c.subject.dtype }).toEqual({ id: c.id, dtype: c.id.startsWith("C1/recompute/") ? "f64+f32" : "f64" });
  }
  for (const c of checks.filter((c) => c.class === "C4")) expect(c.subject.dtype).toBe("f64+f32");
});

test("a failing comparison's message names the tensor and index of its worst element", () => {
  // `a` fails slightly and first; `b` fails by far more: the worst is b[1], and so is the message.
  const cmp = compareTensors({ a: [1.001, 2], b: [3, 4.5] }, { a: [1, 2], b: [3, 4] }, TOL_FD);
  expect(cmp.ok).toBe(false);
  expect(cmp.worst).toMatchObject({ tensor: "b", index: 1 });
  expect(cmp.message).toStartWith("b[1]:");
  const out = fromComparison(cmp);
  expect(out.message).toStartWith(`${out.worst!.tensor}[${out.worst!.index}]`);
});

test("a comparison that stopped before any element reports no worst", () => {
  const out = fromComparison(compareTensors({}, { a: [1] }, TOL_FD));
  expect(out.worst).toBeUndefined();
  expect(out.message).toContain("a: missing");
});
