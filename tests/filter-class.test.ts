/**
 * `--filter` (the flag table of docs/running.md): a class name selects that class exactly — `C1` is C1's checks,
 * not C10's, whose ids also contain "C1" — while any longer pattern stays a substring of the id.
 */
import { expect, test } from "bun:test";
import { matchesFilter } from "../conformance/catalogue.ts";
import { CLI_NAMES, planRun } from "../conformance/plan.ts";

const check = (id: string, cls: `C${number}`, rule?: string) => ({ id, class: cls, subject: rule === undefined ? {} : { rule } });
const CHECKS = [check("C1/delta/opaque", "C1", "delta"), check("C10/delta/repeatable", "C10", "delta"), check("C2/C1-like/x", "C2")];
const select = (...filters: string[]) => CHECKS.filter((c) => matchesFilter(c, filters)).map((c) => c.id);

test("a class name selects its class alone; a longer pattern is a substring", () => {
  expect(select("C1")).toEqual(["C1/delta/opaque"]);
  expect(select("C10")).toEqual(["C10/delta/repeatable"]);
  expect(select("C1/")).toEqual(["C1/delta/opaque"]);
  expect(select("C1-")).toEqual(["C2/C1-like/x"]);
  expect(select("delta/")).toEqual(["C1/delta/opaque", "C10/delta/repeatable"]);
  expect(select("delta")).toEqual(["C1/delta/opaque", "C10/delta/repeatable"]); // the rule key
  expect(select("C1", "C2")).toEqual(["C1/delta/opaque", "C2/C1-like/x"]);
  expect(select()).toEqual(CHECKS.map((c) => c.id));
});

test("--filter C1 plans C1's checks and nothing else", () => {
  const defs = planRun({ seed: 1, profile: "quick", filters: ["C1"], fixtureDirs: [], reportPath: null, names: CLI_NAMES }).defs;
  expect(defs.length).toBeGreaterThan(0);
  expect(defs.filter((d) => d.class !== "C1").map((d) => d.id)).toEqual([]);
});
