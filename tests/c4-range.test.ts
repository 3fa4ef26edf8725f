/**
 * C4 judges the bits of a forward its dtype holds (docs/spec/decisions.md#c4-range): a case whose
 * forward overflows f32 identically with and without the tape is vacuous (discarded), not a
 * mismatch and not a pass; NaN in one run only is still a mismatch.
 */
import { expect, test } from "bun:test";
import { c4Case, c4Checks } from "../conformance/c4/traced.ts";
import { patterns } from "../cases/model-arb.ts";
import type { ModelCaseSpec } from "../cases/model-case.ts";
import { bitwiseEqual } from "../oracle/compare.ts";
import { runCheck } from "../harness/run.ts";

/** The case the quick profile drew at run seed 9016, shrunk: MAC Moneta k = 4, level 2 (p ≈ 2.68) diverges. */
const DIVERGENT: ModelCaseSpec = {"d":8,"seq_len":5,"vocab":12,"window":2,"pad":false,"seed":2147483638,"levels":[{"rule":"moneta","hyper":{"d_hidden":5,"p":1,"q":2,"lambda_2":0,"sign_sharpness":2}},{"rule":"moneta","hyper":{"d_hidden":3,"p":1,"q":2,"lambda_2":0,"sign_sharpness":2}},{"rule":"moneta","hyper":{"d_hidden":4,"p":2.678112030029297,"q":2,"lambda_2":0,"sign_sharpness":2.9869308471679688}},{"rule":"moneta","hyper":{"d_hidden":1,"p":1,"q":2,"lambda_2":0,"sign_sharpness":2}}],"heads":1,"freq":{"kind":"fixed"},"context":"random","pattern":"mac","scales":{"W_v":2,"W_embed":2}};

test("a case whose f32 forward overflows in both runs is vacuous, naming the range", () => {
  const out = c4Case(DIVERGENT, patterns(4).find((p) => p.name === "frozen-1")!);
  expect(out.vacuous).toBe(true);
  expect(out.message).toMatch(/^f32: the forward is not finite \(loss NaN\), traced and untraced alike; the f64 forward of the case reaches \S+e\+\d+: a case outside f32's range/);
});

test("traced-vs-untraced equality: NaN at the same index agrees, NaN against a number does not", () => {
  expect(bitwiseEqual([1, NaN], [1, NaN], true)).toBe(-1);
  expect(bitwiseEqual([1, NaN], [1, NaN])).toBe(1);
  expect(bitwiseEqual([1, NaN], [1, 2], true)).toBe(1);
  expect(bitwiseEqual([NaN, 0], [NaN, -0], true)).toBe(1);
});

test("the check at the quick profile's run seed 9016 passes, the divergent case discarded", () => {
  const def = c4Checks().find((c) => c.id === "C4/mac/moneta/k4/frozen-1")!;
  const r = runCheck(def, { seed: 9016, profile: "quick" });
  expect(r.status).toBe("pass");
  expect(r.message).toContain("1 vacuous case discarded; last: f32: the forward is not finite");
});
