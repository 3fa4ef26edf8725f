/**
 * The spec ships with the project (docs/spec/, D18): every citation `docs/spec/<file>.md#<anchor>`
 * in the code, the READMEs, the fixtures and every check's `spec` field resolves to an explicit
 * `<a id="<anchor>">` in that file, and nothing cites the team's input folder outside the repository.
 */
import { expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../paths.ts";
import { buildCatalogue } from "../conformance/catalogue.ts";
import { catalogueSettings, ENV_NAMES } from "../conformance/plan.ts";

const CITATION = /docs\/spec\/([\w-]+\.md)#([\w.-]+)/g;
/** Links between the spec's own files: [text](file.md#anchor). */
const SPEC_LINK = /\]\(([\w-]+\.md)?#([\w.-]+)\)/g;

function trackedTextFiles(): string[] {
  const out = Bun.spawnSync({ cmd: ["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd: ROOT });
  return out.stdout.toString().split("\n").filter((f) => /\.(ts|md|json|cu|cuh|h|cpp|py|sh)$/.test(f) && !f.startsWith("node_modules/"));
}

const anchorCache = new Map<string, Set<string> | null>();
function anchorsOf(file: string): Set<string> | null {
  if (!anchorCache.has(file)) {
    const path = join(ROOT, "docs", "spec", file);
    anchorCache.set(file, existsSync(path) ? new Set([...readFileSync(path, "utf8").matchAll(/<a id="([^"]+)"><\/a>/g)].map((m) => m[1]!)) : null);
  }
  return anchorCache.get(file)!;
}

export function unresolved(where: string, text: string): string[] {
  const bad: string[] = [];
  for (const m of text.matchAll(CITATION)) {
    const anchors = anchorsOf(m[1]!);
    if (anchors === null) bad.push(`${where}: docs/spec/${m[1]} does not exist`);
    else if (!anchors.has(m[2]!)) bad.push(`${where}: docs/spec/${m[1]} has no anchor #${m[2]}`);
  }
  return bad;
}

test("spec anchors: every docs/spec citation in the repository resolves", () => {
  const bad: string[] = [];
  let citations = 0;
  for (const f of trackedTextFiles()) {
    if (f === "tests/spec-anchors.test.ts") continue;
    const text = readFileSync(join(ROOT, f), "utf8");
    citations += [...text.matchAll(CITATION)].length;
    bad.push(...unresolved(f, text));
    if (f.startsWith("docs/spec/")) {
      for (const m of text.matchAll(SPEC_LINK)) {
        const file = m[1] ?? f.slice("docs/spec/".length);
        const anchors = anchorsOf(file);
        if (anchors === null || !anchors.has(m[2]!)) bad.push(`${f}: link to ${file}#${m[2]} does not resolve`);
      }
    }
  }
  expect(citations).toBeGreaterThan(100);
  expect(bad).toEqual([]);
});

test("spec anchors: every check cites at least one anchor, and each resolves", () => {
  const { checks } = buildCatalogue(catalogueSettings({ fixtureDirs: [], names: ENV_NAMES }));
  const bad: string[] = [];
  for (const c of checks) {
    if ([...c.spec.matchAll(CITATION)].length === 0) bad.push(`${c.id}: spec '${c.spec}' cites no docs/spec anchor`);
    bad.push(...unresolved(c.id, c.spec));
  }
  expect(bad).toEqual([]);
});

test("spec anchors: nothing cites the input folder outside the repository", () => {
  const bad = trackedTextFiles().filter((f) => f !== "tests/spec-anchors.test.ts" && /\.\.\/shared\b/.test(readFileSync(join(ROOT, f), "utf8")));
  expect(bad).toEqual([]);
});

test("spec anchors: the test catches a missing anchor", () => {
  expect(unresolved("planted", "see docs/spec/titans-family.md#no-such-anchor and docs/spec/nope.md#x").length).toBe(2);
});
