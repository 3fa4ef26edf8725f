/**
 * The one kernel case record's generators (cases/kernel-batch.ts) draw, for each case form, the
 * records the two kinds' own generators drew before they were one (a case's digest,
 * details.case_digest, is the fast-check text of its record; reports stay identical only if every
 * record is): for every rule variant of the registry as it was then (PINNED), the generated cases (default and deep), one
 * batch of every regime (and the packed regime, canonical), and the declared boundary, odd-key and
 * saturated cases, digested per form (harness/case-digest.ts CaseDigester). The pinned digests were computed with the former generators
 * (conformance/kernel/native/abi-case.ts batchArb, regimeBatchArb, boundaryExample, oddKeyExample,
 * saturatedExample; conformance/kernel/python/canonical-case.ts pyCaseArb, pyRegimeArb, pyBoundaryExample,
 * pyOddKeyExample; conformance/kernel/python/edges.ts pySaturatedExample) at the same seeds.
 */
import { expect, test } from "bun:test";
import { sampleOf } from "../cases/inner-case.ts";
import { CaseDigester } from "../harness/case-digest.ts";
import { RULES } from "../src/rules/index.ts";
import { boundaryExample, caseArb, oddKeyExample, regimeArb, regimeBatchArb, saturatedExample, type CaseForm } from "../cases/kernel-batch.ts";
import { REGIMES } from "../cases/kernel-regimes.ts";
import type { KernelSeq } from "../cases/kernel-seq.ts";
import { sequencesOf } from "../conformance/kernel/native/abi-case.ts";
import { buildPyCase } from "../conformance/kernel/python/canonical-case.ts";

/**
 * The rules the digests were pinned with: the registry when the former generators were merged. A rule
 * added since had no former generator to agree with, so it is not part of the pin (and adding one
 * leaves the pin as it is). YAAD left the pin when its cases were redrawn at its declared minimum
 * width d >= 2 (docs/spec/miras-compression.md#yaad): the other rules' digests were the same before and
 * after that change (d100c8dc45b8ddaf, 3943c59ef054d046 over these fourteen, computed on both trees).
 */
const PINNED = ["delta", "titans", "hebbian", "moneta", "memora", "lattice", "trellis", "atlas", "gated_delta", "kda", "comba", "dplr", "gated_delta_product", "swa"];

/** The digest (harness/case-digest.ts CaseDigester, as details.case_digest digests) of every pinned rule variant's cases of a form. */
function formDigest(form: CaseForm): string {
  const dg = new CaseDigester();
  for (const d of RULES.filter((r) => PINNED.includes(r.key))) {
    for (const frozen of d.frozen === null ? [false] : [false, true]) {
      const k = `${d.key}${frozen ? ".frozen" : ""}`;
      dg.add(`${k} gen`, [sampleOf(caseArb(d, frozen, "default", form), 7, 4), sampleOf(caseArb(d, frozen, "deep", form), 7, 4)]);
      dg.add(`${k} regime`, form === "abi"
        ? REGIMES.map((r) => sampleOf(regimeBatchArb(d, frozen, r, [16, 64], "abi"), 7, 2))
        : [sampleOf(regimeArb(d, frozen, [16, 64], "canonical"), 7, 2), sampleOf(regimeArb(d, frozen, [16], "canonical", true), 7, 2)]);
      dg.add(`${k} declared`, [boundaryExample(d, frozen, 16, form), oddKeyExample(d, frozen, 16, form), saturatedExample(d, frozen, 16, form)]);
    }
  }
  return dg.result().digest;
}

test("abi cases: the records the native generators drew", () => {
  expect(formDigest("abi")).toBe("d100c8dc45b8ddaf");
});

test("canonical cases: the records the py: generators drew", () => {
  expect(formDigest("canonical")).toBe("3943c59ef054d046");
});

test("the forms' fields: an abi case has C and NULL flags and no d(final state) seed; a canonical case the reverse", () => {
  const d = RULES.find((r) => r.key === "delta")!;
  const [abi] = sampleOf(caseArb(d, false, "default", "abi"), 1, 1);
  const [canonical] = sampleOf(caseArb(d, false, "default", "canonical"), 1, 1);
  expect(Object.keys(abi!)).toEqual(["base", "B", "H", "C", "extra", "dyNull", "dFinalNull"]);
  expect(Object.keys(canonical!)).toEqual(["base", "B", "H", "extra", "dFinalSeed"]);
  expect(saturatedExample(d, false, 16, "abi")!.saturated).toBe(true);
  expect(saturatedExample(d, false, 16, "canonical")!.edge).toEqual({ kind: "saturated" });
  expect(saturatedExample(d, true, 16, "canonical")).toBeNull();
});

test("one sequence record (cases/kernel-seq.ts KernelSeq): both forms' sequences carry their length, their head n mod H and the f64 values; each form its own fields", () => {
  const d = RULES.find((r) => r.key === "delta")!;
  // a batch of several heads
  const abi = sampleOf(caseArb(d, false, "default", "abi"), 3, 20).find((k) => k.H > 1);
  const canonical = sampleOf(caseArb(d, false, "default", "canonical"), 3, 20).find((k) => k.H > 1);
  const a = sequencesOf(d, abi!, false);
  const c = buildPyCase(d, canonical!);
  const common = ["T", "h", "in64", "st64", "dy64", "dFinal64"];
  for (const [seqs, H, T, own] of [[a.seqs, abi!.H, a.shape.T, ["cfg", "in32", "st32", "dy32", "dFinal32"]], [c.seqs, c.H, c.T, ["kin64"]]] as const) {
    expect(seqs.length).toBeGreaterThan(1);
    seqs.forEach((s: KernelSeq, n) => {
      expect(s.T).toBe(T);
      expect(s.h).toBe(n % H);
      expect(s.dy64.dtype).toBe("f64");
      for (const f of [...common, ...own]) expect(s).toHaveProperty(f);
    });
  }
});
