/**
 * The precision table (docs/spec/precision.md#table): precision.md's table is the one rendered from
 * oracle/precision-table.ts, and the judging modules' constants are the table's values.
 */
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../paths.ts";
import { BIAS, C6, C9, KERNEL, POWER, PY, TAPE, UNIT_ROUNDOFF, renderPrecisionTable } from "../oracle/precision-table.ts";
import { BIAS_FLOOR, BIAS_K } from "../oracle/bias.ts";
import { EXERCISED, FLOOR_REL, FLOOR_REL_F32_ACC, GROUP_FLOOR, ILL_CONDITIONED, floorRel } from "../oracle/kernel-judge.ts";
import { MATERIAL, SCALE_EPS } from "../oracle/kernel-power.ts";
import { TOL_FD, TOL_ULP, VACUITY_FACTOR, flashRule } from "../oracle/compare.ts";
import { ORDER_FACTOR, SPREAD_CAP } from "../conformance/c9/compare.ts";
import { FD_ATOL, FD_RTOL } from "../conformance/c9/rule-cases.ts";
import { IMPLAUSIBLE } from "../conformance/kernel/python/plausible.ts";
import { unitRoundoff } from "../src/precision.ts";

/** The text between precision.md's table markers. */
export function documentedTable(): string {
  const doc = readFileSync(join(ROOT, "docs/spec/precision.md"), "utf8");
  const m = doc.match(/<!-- precision-table:begin -->\n([\s\S]*?)\n<!-- precision-table:end -->/);
  if (m === null) throw new Error("docs/spec/precision.md: the precision-table markers are missing");
  return m[1]!;
}

test("precision.md's table is the module's, row for row", () => {
  const want = renderPrecisionTable().split("\n"), got = documentedTable().split("\n");
  for (let i = 0; i < Math.max(want.length, got.length); i++) {
    if (got[i] !== want[i]) {
      throw new Error(`docs/spec/precision.md#table row ${i + 1} disagrees with oracle/precision-table.ts:\n  doc:    ${got[i] ?? "(missing)"}\n  module: ${want[i] ?? "(missing)"}\n` +
        "replace the text between the precision-table markers with renderPrecisionTable()'s output");
    }
  }
});

test("a changed constant makes the rendered table disagree with the doc (the check can fail)", () => {
  const before = renderPrecisionTable();
  const mutable = BIAS.floor as unknown as { value: Record<string, number> };
  const saved = mutable.value;
  mutable.value = { ...saved, f32: 2e-3 };
  try {
    expect(renderPrecisionTable()).not.toBe(before);
    expect(renderPrecisionTable()).not.toBe(documentedTable());
  } finally {
    mutable.value = saved;
  }
  expect(renderPrecisionTable()).toBe(before);
});

test("the judging modules apply the table's values", () => {
  expect([FLOOR_REL, FLOOR_REL_F32_ACC, floorRel("f64"), floorRel("f32")]).toEqual([KERNEL.floorRel.value.f64, KERNEL.floorRel.value.f32, 1e-6, 1e-4]);
  expect([EXERCISED, GROUP_FLOOR, ILL_CONDITIONED]).toEqual([KERNEL.exercised.value, KERNEL.groupFloor.value, KERNEL.illConditioned.value]);
  expect([BIAS_K, BIAS_FLOOR]).toEqual([BIAS.k.value, BIAS.floor.value]);
  expect([MATERIAL, SCALE_EPS]).toEqual([POWER.material.value, POWER.scaleEps.value]);
  expect([TOL_ULP.rtol, TOL_ULP.atol, TOL_FD.rtol, TOL_FD.atol, FD_RTOL, FD_ATOL, VACUITY_FACTOR])
    .toEqual([TAPE.handWritten.value.rtol, TAPE.handWritten.value.atol, TAPE.finiteDifferences.value.rtol, TAPE.finiteDifferences.value.atol, TAPE.finiteDifferences.value.rtol, TAPE.finiteDifferences.value.atol, TAPE.vacuityFactor.value]);
  expect([ORDER_FACTOR, SPREAD_CAP, IMPLAUSIBLE]).toEqual([C9.orderFactor.value, C9.spreadCap.value, PY.implausible.value]);
  expect(C6.f32FloorUlps.value).toBe(8);
  for (const d of ["f64", "f32", "bf16", "f16"] as const) expect(UNIT_ROUNDOFF.value[d]).toBe(unitRoundoff(d));
  // the bound's factor: a kernel exactly twice the plain error plus the floor passes, a hair more fails
  const ref = [1], plain = [1 + 2 ** -10];
  expect(flashRule([1 + 2 ** -9], ref, plain, 0).ok).toBe(true);
  expect(flashRule([1 + 2 ** -9 + 2 ** -20], ref, plain, 0).ok).toBe(false);
});

test("every entry says where it applies and why", () => {
  for (const line of documentedTable().split("\n").slice(2)) {
    const cells = line.split(" | ");
    expect(cells.length).toBe(5);
    for (const c of cells) expect(c.replace(/\|/g, "").trim().length).toBeGreaterThan(0);
  }
});
