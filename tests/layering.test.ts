/**
 * The project's layering (docs/contributing.md "Layout"): data flows one way,
 *   reference (src/, with ffi/ beside it) ← oracle/ ← cases/ ← harness/ ← conformance/ (checks)
 * and a module may import only from its own layer or the layers before it. src/ is the reference
 * alone: it imports nothing but itself (no oracle, cases, checks, ffi or packages). A check folder
 * (conformance/<folder>/) imports no other check folder: what two of them need belongs one layer
 * down. bench/ and fixtures/ use the checks' public modules (conformance/kernel-api.ts,
 * conformance/chunk-api.ts), never a check folder's own modules (conformance/kernel/, conformance/c6/,
 * ...). No modules import each other, directly or through others (no import cycles).
 */
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { dirname, relative, resolve } from "node:path";
import { ROOT } from "../paths.ts";

/** Layer of each top-level folder (or root file); tools at the top may import anything below. */
const LAYERS: Readonly<Record<string, number>> = {
  "paths.ts": 0, "environment.ts": 0, src: 0, ffi: 0, oracle: 1, cases: 2, harness: 3, conformance: 4,
  bench: 5, fixtures: 5, examples: 5, tests: 5,
};
/** Packages each layer may use (besides node: and bun: built-ins, which only src/ may not need). */
const PACKAGES: Readonly<Record<string, readonly string[]>> = {
  src: [], ffi: [], "paths.ts": [], "environment.ts": [], oracle: [],
  cases: ["fast-check", "ajv"], harness: ["fast-check", "ajv"], conformance: ["fast-check", "mathjs", "ajv"],
  bench: ["tinybench"], fixtures: [], examples: [], tests: [],
};

function tsFiles(): string[] {
  const out = Bun.spawnSync({ cmd: ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.ts"], cwd: ROOT });
  return out.stdout.toString().split("\n").filter((f) => f !== "" && f.split("/")[0]! in LAYERS);
}

function folderOf(rel: string): string {
  return rel.includes("/") ? rel.split("/")[0]! : rel;
}

function importsOf(text: string): string[] {
  const specs: string[] = [];
  for (const m of text.matchAll(/(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)/g)) {
    specs.push((m[1] ?? m[2])!);
  }
  return specs;
}

/** The check folder of a file (conformance/<folder>/...), or null for the suite's own files (conformance/cli.ts, ...). */
function checkFolderOf(rel: string): string | null {
  const parts = rel.split("/");
  return parts[0] === "conformance" && parts.length > 2 ? parts[1]! : null;
}

/** Folders outside the suite's checks that use them through their public modules only. */
const OUTSIDE_USERS: readonly string[] = ["bench", "fixtures"];

export function layeringViolations(files: readonly { rel: string; text: string }[]): string[] {
  const bad: string[] = [];
  for (const { rel, text } of files) {
    const from = folderOf(rel);
    for (const spec of importsOf(text)) {
      if (spec.startsWith(".")) {
        const target = relative(ROOT, resolve(ROOT, dirname(rel), spec));
        const to = folderOf(target);
        const checkFrom = checkFolderOf(rel), checkTo = checkFolderOf(target);
        if (!(to in LAYERS)) {
          bad.push(`${rel} imports ${spec}: outside the layered folders`);
        } else if (LAYERS[to]! > LAYERS[from]! || (from === "src" && to !== "src")) {
          bad.push(`${rel} (${from}) imports ${target} (${to}): against the direction reference ← oracle ← cases ← harness ← checks`);
        } else if (checkFrom !== null && checkTo !== null && checkFrom !== checkTo) {
          bad.push(`${rel} imports ${target}: the check folder conformance/${checkFrom} imports another check folder, conformance/${checkTo}`);
        } else if (OUTSIDE_USERS.includes(from) && checkTo !== null) {
          bad.push(`${rel} imports ${target}: ${from}/ uses the checks' public modules (conformance/kernel-api.ts, conformance/chunk-api.ts), not the check folder conformance/${checkTo}`);
        }
      } else if (!spec.startsWith("node:") && !spec.startsWith("bun:") && !(spec === "bun" && from !== "src")) {
        const pkg = spec.startsWith("@") ? spec.split("/").slice(0, 2).join("/") : spec.split("/")[0]!;
        if (!PACKAGES[from]!.includes(pkg)) bad.push(`${rel} (${from}) imports the package ${pkg}, which its layer may not use`);
      } else if (from === "src") {
        bad.push(`${rel} imports ${spec}: the reference uses no runtime built-ins`);
      }
    }
  }
  return bad;
}

/** Relative imports as edges between files (type-only imports included: they tie the modules as much). */
function importGraph(files: readonly { rel: string; text: string }[]): Map<string, string[]> {
  const known = new Set(files.map((f) => f.rel));
  const g = new Map<string, string[]>();
  for (const { rel, text } of files) {
    g.set(rel, importsOf(text).filter((s) => s.startsWith(".")).map((s) => relative(ROOT, resolve(ROOT, dirname(rel), s))).filter((t) => known.has(t)));
  }
  return g;
}

/** The import cycles: each strongly connected set of two or more files (or a file importing itself), sorted. */
export function importCycles(files: readonly { rel: string; text: string }[]): string[][] {
  const g = importGraph(files);
  const index = new Map<string, number>(), low = new Map<string, number>(), stack: string[] = [], onStack = new Set<string>();
  const cycles: string[][] = [];
  let next = 0;
  const visit = (v: string): void => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of g.get(v)!) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const scc: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      scc.push(w);
    } while (w !== v);
    if (scc.length > 1 || g.get(v)!.includes(v)) cycles.push(scc.sort());
  };
  for (const v of g.keys()) if (!index.has(v)) visit(v);
  return cycles.sort((a, b) => a[0]!.localeCompare(b[0]!));
}

/** No module imports another that imports it back, directly or around a loop (type-only imports included). */
const KNOWN_CYCLES: readonly (readonly string[])[] = [];

test("layering: every import follows reference ← oracle ← cases ← harness ← checks", () => {
  const files = tsFiles().map((rel) => ({ rel, text: readFileSync(resolve(ROOT, rel), "utf8") }));
  expect(files.length).toBeGreaterThan(50);
  expect(layeringViolations(files)).toEqual([]);
});

test("layering: the test itself catches an import against the direction", () => {
  const planted = [
    { rel: "src/rules/x.ts", text: 'import { gradCheck } from "../../oracle/gradcheck.ts";\n' },
    { rel: "src/ops/y.ts", text: 'import * as fc from "fast-check";\n' },
    { rel: "cases/z.ts", text: 'import { runCheck } from "../harness/run.ts";\n' },
    { rel: "ffi/w.ts", text: 'import type { Report } from "../harness/report.ts";\n' },
  ];
  expect(layeringViolations(planted).length).toBe(4);
});

test("layering: no import cycles (besides the known ones, each still present)", () => {
  const files = tsFiles().map((rel) => ({ rel, text: readFileSync(resolve(ROOT, rel), "utf8") }));
  expect(importCycles(files)).toEqual(KNOWN_CYCLES.map((c) => [...c]));
});

test("layering: the test catches a check folder importing another, and an import cycle", () => {
  const planted = [
    { rel: "conformance/c6/x.ts", text: 'import { flashCompare } from "../kernel/compare.ts";\n' },
    { rel: "conformance/c6/y.ts", text: 'import { replay } from "./replay.ts";\nimport { cli } from "../cli.ts";\n' },
    { rel: "conformance/cli.ts", text: 'import { c5 } from "./kernel/native-checks.ts";\n' },
  ];
  expect(layeringViolations(planted)).toEqual([
    "conformance/c6/x.ts imports conformance/kernel/compare.ts: the check folder conformance/c6 imports another check folder, conformance/kernel",
  ]);
  const outside = [
    { rel: "bench/x.ts", text: 'import type { KSpec } from "../conformance/kernel/native/abi-case.ts";\nimport { forwardCase } from "../conformance/kernel-api.ts";\n' },
    { rel: "fixtures/y.ts", text: 'import { parsePyBackend } from "../conformance/kernel/python/plan.ts";\n' },
    { rel: "tests/z.test.ts", text: 'import { parsePyBackend } from "../conformance/kernel/python/plan.ts";\n' },
  ];
  expect(layeringViolations(outside)).toEqual([
    "bench/x.ts imports conformance/kernel/native/abi-case.ts: bench/ uses the checks' public modules (conformance/kernel-api.ts, conformance/chunk-api.ts), not the check folder conformance/kernel",
    "fixtures/y.ts imports conformance/kernel/python/plan.ts: fixtures/ uses the checks' public modules (conformance/kernel-api.ts, conformance/chunk-api.ts), not the check folder conformance/kernel",
  ]);
  const cyclic = [
    { rel: "oracle/a.ts", text: 'import type { B } from "./b.ts";\n' },
    { rel: "oracle/b.ts", text: 'import { c } from "./c.ts";\n' },
    { rel: "oracle/c.ts", text: 'import { a } from "./a.ts";\n' },
    { rel: "oracle/d.ts", text: 'import { a } from "./a.ts";\n' },
  ];
  expect(importCycles(cyclic)).toEqual([["oracle/a.ts", "oracle/b.ts", "oracle/c.ts"]]);
});
