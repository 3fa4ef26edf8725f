/**
 * The project's layering (README "Layout"): data flows one way,
 *   reference (src/, with ffi/ beside it) ← oracle/ ← cases/ ← harness/ ← conformance/ (checks)
 * and a module may import only from its own layer or the layers before it. src/ is the reference
 * alone: it imports nothing but itself (no oracle, cases, checks, ffi or packages).
 */
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { dirname, relative, resolve } from "node:path";
import { ROOT } from "../paths.ts";

/** Layer of each top-level folder (or root file); tools at the top may import anything below. */
const LAYERS: Readonly<Record<string, number>> = {
  "paths.ts": 0, src: 0, ffi: 0, oracle: 1, cases: 2, harness: 3, conformance: 4,
  bench: 5, bridge: 5, fixtures: 5, examples: 5, tests: 5,
};
/** Packages each layer may use (besides node: and bun: built-ins, which only src/ may not need). */
const PACKAGES: Readonly<Record<string, readonly string[]>> = {
  src: [], ffi: [], "paths.ts": [], oracle: [], bridge: ["fast-check"],
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

export function layeringViolations(files: readonly { rel: string; text: string }[]): string[] {
  const bad: string[] = [];
  for (const { rel, text } of files) {
    const from = folderOf(rel);
    for (const spec of importsOf(text)) {
      if (spec.startsWith(".")) {
        const target = relative(ROOT, resolve(ROOT, dirname(rel), spec));
        const to = folderOf(target);
        if (!(to in LAYERS)) {
          bad.push(`${rel} imports ${spec}: outside the layered folders`);
        } else if (LAYERS[to]! > LAYERS[from]! || (from === "src" && to !== "src")) {
          bad.push(`${rel} (${from}) imports ${target} (${to}): against the direction reference ← oracle ← cases ← harness ← checks`);
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
