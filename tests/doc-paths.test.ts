/**
 * Every path and link the documentation writes exists (docs/spec/README.md#citing): markdown links
 * `[text](path#anchor)` in every tracked `.md` file resolve to a file of the repository and, for a
 * markdown target with an anchor, to an explicit `<a id>` or a heading of that file; repository
 * paths written in backticks (`conformance/kernel/native/plan.ts`) exist; and the `spec` text and tolerance
 * kind of every check name only files that exist.
 */
import { expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import { ROOT } from "../paths.ts";
import { buildCatalogue } from "../conformance/catalogue.ts";
import { catalogueSettings, ENV_NAMES } from "../conformance/plan.ts";

function tracked(pattern: RegExp): string[] {
  const out = Bun.spawnSync({ cmd: ["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd: ROOT });
  return out.stdout.toString().split("\n").filter((f) => pattern.test(f) && !f.startsWith("node_modules/"));
}

/** GitHub's heading slug: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading.trim().toLowerCase().replace(/[`*_]/g, "").replace(/[^\p{L}\p{N}\s-]/gu, "").replace(/\s/g, "-");
}

const anchorCache = new Map<string, Set<string>>();
function anchorsOf(file: string): Set<string> {
  let set = anchorCache.get(file);
  if (!set) {
    const text = readFileSync(join(ROOT, file), "utf8");
    set = new Set([...text.matchAll(/<a id="([^"]+)"><\/a>/g)].map((m) => m[1]!));
    for (const m of text.matchAll(/^#{1,6}\s+(.+)$/gm)) set.add(slug(m[1]!));
    anchorCache.set(file, set);
  }
  return set;
}

const LINK = /\]\(([^)\s]+)\)/g;
/** A repository path in backticks: a top-level folder of the project, then a file with an extension. */
const TOP = ["src", "oracle", "cases", "harness", "conformance", "ffi", "cuda", "python", "tests", "bench", "fixtures", "examples", "docs", "reports"];
const BACKTICK_PATH = new RegExp("`((?:" + TOP.join("|") + ")/[\\w./-]+\\.(?:ts|md|py|cu|cuh|h|cpp|json|sh))`", "g");

/** Problems in one markdown file's links and backticked paths. */
export function brokenDocPaths(file: string, text: string): string[] {
  const bad: string[] = [];
  for (const m of text.matchAll(LINK)) {
    const target = m[1]!;
    if (/^[a-z]+:/.test(target)) continue; // http:, https:, mailto:
    const [path, anchor] = target.split("#") as [string, string | undefined];
    const resolved = path === "" ? file : normalize(join(dirname(file), path));
    if (!existsSync(join(ROOT, resolved))) {
      bad.push(`${file}: link (${target}) names ${resolved}, which does not exist`);
      continue;
    }
    if (anchor && resolved.endsWith(".md") && !anchorsOf(resolved).has(anchor)) bad.push(`${file}: link (${target}) has no anchor #${anchor} in ${resolved}`);
  }
  for (const m of text.matchAll(BACKTICK_PATH)) {
    const p = m[1]!;
    if (/[<>*]/.test(p)) continue; // a pattern such as src/rules/<key>.ts
    if (p.startsWith("reports/") && !p.startsWith("reports/schema/")) continue; // a file a run writes
    if (!existsSync(join(ROOT, p))) bad.push(`${file}: \`${p}\` does not exist`);
  }
  return bad;
}

test("doc paths: every link and repository path in the documentation exists", () => {
  const bad: string[] = [];
  let links = 0;
  for (const f of tracked(/\.md$/)) {
    const text = readFileSync(join(ROOT, f), "utf8");
    links += [...text.matchAll(LINK)].length + [...text.matchAll(BACKTICK_PATH)].length;
    bad.push(...brokenDocPaths(f, text));
  }
  expect(links).toBeGreaterThan(100);
  expect(bad).toEqual([]);
});

test("doc paths: every check's spec text and tolerance kind name existing files", () => {
  const { checks } = buildCatalogue(catalogueSettings({ fixtureDirs: [], names: ENV_NAMES }));
  const bad: string[] = [];
  const FILE = /\b((?:docs|conformance|oracle|cases|harness|src|ffi|cuda|python)\/[\w./-]+\.(?:md|ts|py|cu|cuh|h))\b/g;
  for (const c of checks) {
    const text = `${c.spec} ${JSON.stringify(c.tolerance ?? {})}`;
    for (const m of text.matchAll(FILE)) if (!existsSync(join(ROOT, m[1]!))) bad.push(`${c.id}: names ${m[1]}, which does not exist`);
    if (/README\.md, tolerance policy|README tolerance policy/.test(text)) bad.push(`${c.id}: cites a "tolerance policy" section that does not exist`);
  }
  expect(bad).toEqual([]);
}, 120_000); // building the catalogue takes seconds on a loaded machine

test("doc paths: the test catches a missing file, a missing anchor and a stale backticked path", () => {
  const planted = "see [x](nope.md), [y](docs/spec/precision" + ".md#no-such-anchor) and `conformance/kernel/no-such.ts`";
  expect(brokenDocPaths("README.md", planted).length).toBe(3);
});
