/**
 * docs/contributing.md "Adding a check class", walked: in a temporary copy of the repository a small real class,
 * C10 (each rule's frozen read, called twice on one input, gives the same output bitwise), is added
 * in the three files the guide names, and each step is shown to be needed and sufficient: the
 * catalogue lists the class once it is registered; the spec-anchor test fails until its section
 * exists; a run of it passes with a report the schema accepts; a planted difference between the two
 * calls fails it (exit 1). No other file changes.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../paths.ts";
import { copyTree, runIn, editIn } from "./tree-copy.ts";

const GUIDE = readFileSync(join(ROOT, "docs", "contributing.md"), "utf8");
const START = GUIDE.indexOf("## Adding a check class\n");
const STEPS = GUIDE.slice(START, GUIDE.indexOf("\n## ", START + 1));

/** The anchor the class cites, spelled so that tests/spec-anchors.test.ts does not read it as this file's citation. */
const CITE = ["docs/spec/conformance.md", "c10"].join("#");

/** Step 1: the class's checks (a real property: a frozen read keeps no hidden state between calls). */
const CHECKS = `/**
 * C10 — repeatable reads (${CITE}): each rule's frozen read, called twice on
 * one input and state, gives the same output bitwise.
 */
%import type { CheckDef } from "../../harness/check.ts";
%import { frozenForward } from "../../src/rules/level.ts";
%import { buildRuleCase } from "../../cases/rule-case.ts";
%import { variants, vkey } from "../../cases/rule-variant.ts";

export function c10Checks(): CheckDef[] {
  return variants().filter((v) => v.frozen).map((v) => ({
    kind: "single", id: \`C10/\${vkey(v)}/repeatable\`, class: "C10", subject: { rule: v.decl.key, frozen: true, dtype: "f64" },
    spec: "${CITE}", tolerance: { kind: "exact" },
    run: () => {
      const c = buildRuleCase(v.decl, { d: 5, seq_len: 3, hyper: {}, alpha: "mid", theta: "small", state: "random", seed: 7 }, "f64", true);
      const a = frozenForward(v.decl, c.X, c.params, c.state, c.cfg).data;
      const b = frozenForward(v.decl, c.X, c.params, c.state, c.cfg).data;
      const i = a.findIndex((x, j) => !Object.is(x, b[j]));
      if (i >= 0) return { ok: false, message: \`y[\${i}]: \${a[i]} then \${b[i]}\` };
      return { ok: true, vacuous: a.every((x) => Math.abs(x) < 1e-300) };
    },
  }));
}
`.replace(/^%/gm, ""); // (% keeps tests/layering.test.ts from reading the file's imports as this test's)

describe("docs/contributing.md \"Adding a check class\"", () => {
  test("the guide names three files, each of which exists", () => {
    expect(START).toBeGreaterThan(0);
    expect(STEPS).toContain("Files edited by hand: three");
    for (const f of ["conformance/catalogue.ts", "docs/spec/conformance.md", "harness/check.ts", "conformance/parallel.ts"]) {
      expect({ f, cited: STEPS.includes(`\`${f}\``), exists: existsSync(join(ROOT, f)) }).toEqual({ f, cited: true, exists: true });
    }
  });

  test("walked with C10: each step is needed, the steps are enough, and its failure fails the run", () => {
    const dir = copyTree("nlc-add-class-");
    try {
      // 1. its checks
      mkdirSync(join(dir, "conformance/c10"));
      writeFileSync(join(dir, "conformance/c10/checks.ts"), CHECKS);
      expect(runIn(dir, ["conformance/cli.ts", "--list", "--filter", "C10"]).code).toBe(2); // not registered: no such check
      // 2. register it
      editIn(dir, "conformance/catalogue.ts", (s) => s
        .replace('import { c9Checks } from "./c9/checks.ts";', 'import { c9Checks } from "./c9/checks.ts";\nimport { c10Checks } from "./c10/checks.ts";')
        .replace("  c9: () => c9Checks(),\n", "  c9: () => c9Checks(),\n  c10: () => c10Checks(),\n"));
      const list = runIn(dir, ["conformance/cli.ts", "--list", "--filter", "C10"]);
      expect(list.code).toBe(0);
      const ids = list.out.split("\n").filter((l) => l.startsWith("C10/"));
      expect(ids.length).toBeGreaterThan(5);
      // 3. its section: the spec-anchor test fails until the anchor its checks cite exists
      const anchors = ["test", "tests/spec-anchors.test.ts", "-t", "every check cites at least one anchor"]; // (the copy is no git repository: the test of the tracked files has none to read)
      expect(runIn(dir, anchors).code).not.toBe(0);
      editIn(dir, "docs/spec/conformance.md", (s) => s
        .replace(/^(\| \[C9\]\(#c9\) .*)$/m, "$1\n| [C10](#c10) | repeatable reads | a frozen read called twice on one input, bitwise | f64 |")
        .replace('<a id="c9"></a>\n', '<a id="c10"></a>\n## C10 — repeatable reads\n\nEach rule\'s frozen read, called twice on one input and state, gives the same output bitwise.\n\n<a id="c9"></a>\n'));
      const anchorsAfter = runIn(dir, anchors);
      expect({ code: anchorsAfter.code, out: anchorsAfter.code === 0 ? "" : anchorsAfter.out.slice(-2000) }).toEqual({ code: 0, out: "" });

      // the class runs: its checks pass, in a report the schema accepts (a report is validated as it is written)
      const report = join(dir, "c10.json");
      const ok = runIn(dir, ["conformance/cli.ts", "--filter", "C10", "--report", report]);
      expect({ code: ok.code, out: ok.code === 0 ? "" : ok.out.slice(-2000) }).toEqual({ code: 0, out: "" });
      const r = JSON.parse(readFileSync(report, "utf8")) as { checks: { id: string; class: string; status: string }[] };
      expect(r.checks.length).toBe(ids.length);
      expect(r.checks.every((c) => c.class === "C10" && c.status === "pass")).toBe(true);

      // planted: the second call differs in one element; every check of the class fails, the run exits 1
      editIn(dir, "conformance/c10/checks.ts", (s) => s.replace(
        "const b = frozenForward(v.decl, c.X, c.params, c.state, c.cfg).data;",
        "const b = frozenForward(v.decl, c.X, c.params, c.state, c.cfg).data.slice();\n      b[0] = b[0]! + 1;"));
      const planted = join(dir, "c10-planted.json");
      const bad = runIn(dir, ["conformance/cli.ts", "--filter", "C10", "--report", planted]);
      expect(bad.code).toBe(1);
      const rb = JSON.parse(readFileSync(planted, "utf8")) as { checks: { status: string; message?: string }[] };
      for (const c of rb.checks) expect({ status: c.status, names: (c.message ?? "").includes("y[0]: ") }).toEqual({ status: "fail", names: true });

    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 600_000);
});
