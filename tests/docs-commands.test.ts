/**
 * The commands the docs print work on a fresh clone, where Bun comes from npm: a script is run as
 * `npx bun <file>` (or through an npm script), never as a bare `bun <file>`; the README says what
 * a fresh clone needs (g++ for the cpu-emu kernels) and how CI gets JUnit output.
 */
import { expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../paths.ts";

function markdown(): string[] {
  const spec = readdirSync(join(ROOT, "docs", "spec")).filter((f) => f.endsWith(".md")).map((f) => join("docs", "spec", f));
  const guides = readdirSync(join(ROOT, "docs")).filter((f) => f.endsWith(".md")).map((f) => join("docs", f));
  const measurements = readdirSync(join(ROOT, "reports", "measurements")).filter((f) => f.endsWith(".md")).map((f) => join("reports", "measurements", f));
  return ["README.md", "fixtures/README.md", "cuda/README.md", ...guides, ...spec, ...measurements];
}

test("no doc prints a bare `bun <script>` command", () => {
  const bad: string[] = [];
  for (const file of markdown()) {
    let text = "";
    try {
      text = readFileSync(join(ROOT, file), "utf8");
    } catch {
      continue;
    }
    text.split("\n").forEach((line, i) => {
      // `bun x.ts` at the start of a code line or of an inline code span, not after npx
      for (const m of line.matchAll(/(^|`)bun ([\w./-]+\.ts)/g)) bad.push(`${file}:${i + 1}: bun ${m[2]}`);
    });
  }
  expect(bad).toEqual([]);
});

test("the README's quick start names g++ and JUnit", () => {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const quick = readme.slice(readme.indexOf("## Quick start"), readme.indexOf("## What is checked"));
  expect(quick).toContain("g++");
  expect(quick).toContain("--reporter=junit");
  expect(quick).not.toContain("are all you need");
});
