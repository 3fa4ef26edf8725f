/**
 * The one kernel case record's generators (cases/kernel-batch.ts) draw, for each case form, the
 * records the two kinds' own generators drew before they were one (a case's digest,
 * details.case_digest, is the fast-check text of its record; reports stay identical only if every
 * record is): for every rule variant of the registry, the generated cases (default and deep), one
 * batch of every regime (and the packed regime, canonical), and the declared boundary, odd-key and
 * saturated cases, digested per form. The pinned digests were computed with the former generators
 * (conformance/c5/batch.ts batchArb, regimeBatchArb, boundaryExample, oddKeyExample,
 * saturatedExample; conformance/py/cases.ts pyCaseArb, pyRegimeArb, pyBoundaryExample,
 * pyOddKeyExample; conformance/py/edges.ts pySaturatedExample) at the same seeds.
 */
import { expect, test } from "bun:test";
import * as fc from "fast-check";
import { createHash } from "node:crypto";
import { RULES } from "../src/rules/index.ts";
import { boundaryExample, caseArb, oddKeyExample, regimeArb, regimeBatchArb, saturatedExample, type CaseForm } from "../cases/kernel-batch.ts";
import { REGIMES } from "../cases/kernel-regimes.ts";

const hash = (s: string) => createHash("sha256").update(s).digest("hex").slice(0, 16);
const h = (x: unknown) => hash(fc.stringify(x));

/** One line per rule variant and kind of case: `<variant> <form> <kind>=<digest of its records>`. */
function formDigest(form: CaseForm): string {
  const lines: string[] = [];
  for (const d of RULES) {
    for (const frozen of d.frozen === null ? [false] : [false, true]) {
      const k = `${d.key}${frozen ? ".frozen" : ""} ${form}`;
      lines.push(`${k} gen=${h([fc.sample(caseArb(d, frozen, "default", form), { seed: 7, numRuns: 4 }), fc.sample(caseArb(d, frozen, "deep", form), { seed: 7, numRuns: 4 })])}`);
      lines.push(form === "abi"
        ? `${k} regime=${h(REGIMES.map((r) => fc.sample(regimeBatchArb(d, frozen, r, [16, 64], "abi"), { seed: 7, numRuns: 2 })))}`
        : `${k} regime=${h([fc.sample(regimeArb(d, frozen, [16, 64], "canonical"), { seed: 7, numRuns: 2 }), fc.sample(regimeArb(d, frozen, [16], "canonical", true), { seed: 7, numRuns: 2 })])}`);
      lines.push(`${k} declared=${h([boundaryExample(d, frozen, 16, form), oddKeyExample(d, frozen, 16, form), saturatedExample(d, frozen, 16, form)])}`);
    }
  }
  return hash(lines.map((l) => `${l}\n`).join(""));
}

test("abi cases: the records the native generators drew", () => {
  expect(formDigest("abi")).toBe("e75378112c2e5123");
});

test("canonical cases: the records the py: generators drew", () => {
  expect(formDigest("canonical")).toBe("84784c199bafbfd5");
});

test("the forms' fields: an abi case has C and NULL flags and no d(final state) seed; a canonical case the reverse", () => {
  const d = RULES.find((r) => r.key === "delta")!;
  const [abi] = fc.sample(caseArb(d, false, "default", "abi"), { seed: 1, numRuns: 1 });
  const [canonical] = fc.sample(caseArb(d, false, "default", "canonical"), { seed: 1, numRuns: 1 });
  expect(Object.keys(abi!)).toEqual(["base", "B", "H", "C", "extra", "dyNull", "dFinalNull"]);
  expect(Object.keys(canonical!)).toEqual(["base", "B", "H", "extra", "dFinalSeed"]);
  expect(saturatedExample(d, false, 16, "abi")!.saturated).toBe(true);
  expect(saturatedExample(d, false, 16, "canonical")!.edge).toEqual({ kind: "saturated" });
  expect(saturatedExample(d, true, 16, "canonical")).toBeNull();
});
