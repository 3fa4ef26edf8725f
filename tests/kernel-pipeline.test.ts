/**
 * The one kernel pipeline (docs/spec/kernel-abi.md#pipeline): the modules of conformance/kernel/
 * itself (the plan, the catalogue's kernel checks, the check definition, the child program) import
 * no kind's module, and no kind's folder (conformance/kernel/<kind>/) imports another's. The one
 * exception is the child's table of kinds, which loads a kind's module by name in that kind's child
 * (a dynamic import, so no other child loads it). A kernel feature lands once, in the pipeline, or
 * in the one kind it belongs to.
 */
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import { ROOT } from "../paths.ts";

const KERNEL = "conformance/kernel/";

/** Every import of a module (static, type-only or dynamic) that names a project file, resolved to its repository path. */
function imports(rel: string, text: string): { to: string; dynamic: boolean }[] {
  const out: { to: string; dynamic: boolean }[] = [];
  for (const m of text.matchAll(/(?:^|\n)\s*(?:import|export)\s[^;]*?from\s+["']([^"']+)["']|import\(\s*["']([^"']+)["']\s*\)/g)) {
    const spec = (m[1] ?? m[2])!;
    if (spec.startsWith(".")) out.push({ to: normalize(join(dirname(rel), spec)), dynamic: m[2] !== undefined });
  }
  return out;
}

/** The folder of a kind a path lies in (conformance/kernel/<kind>/...), or null: the pipeline itself, or outside. */
const kindOf = (path: string): string | null => (path.startsWith(KERNEL) && path.slice(KERNEL.length).includes("/") ? path.slice(KERNEL.length).split("/")[0]! : null);

/** The pipeline's modules that import a kind's module, and kind folders importing another kind's, as `from -> to`. */
export function crossings(files: readonly { rel: string; text: string }[]): string[] {
  const out: string[] = [];
  for (const { rel, text } of files) {
    if (!rel.startsWith(KERNEL)) continue;
    const own = kindOf(rel);
    for (const { to, dynamic } of imports(rel, text)) {
      const theirs = kindOf(to);
      if (theirs === null || theirs === own) continue;
      // the child's table of kinds loads each kind's module in that kind's child only
      if (rel === `${KERNEL}child.ts` && dynamic) continue;
      out.push(`${rel} -> ${to}`);
    }
  }
  return out;
}

function sources(): { rel: string; text: string }[] {
  const ls = Bun.spawnSync({ cmd: ["git", "ls-files", "--cached", "--others", "--exclude-standard", `${KERNEL}*.ts`], cwd: ROOT });
  return ls.stdout.toString().split("\n").filter((f) => f !== "").map((rel) => ({ rel, text: readFileSync(join(ROOT, rel), "utf8") }));
}

test("the kernel pipeline imports no kind's module, and no kind imports another's", () => {
  const files = sources();
  expect(files.some((f) => f.rel === `${KERNEL}child.ts`)).toBe(true);
  expect(files.some((f) => kindOf(f.rel) === "native") && files.some((f) => kindOf(f.rel) === "python")).toBe(true);
  expect(crossings(files)).toEqual([]);
});

test("planted: a pipeline module importing a kind's, a kind importing another's, a static import in the table", () => {
  expect(crossings([
    { rel: `${KERNEL}phase-check.ts`, text: 'import { pythonDeclaration } from "./python/backend.ts";\n' },
    { rel: `${KERNEL}python/definitions.ts`, text: 'import type { NativeBatch } from "../native/backend.ts";\n' },
    { rel: `${KERNEL}child.ts`, text: 'import { NATIVE_CHILD } from "./native/child.ts";\nconst p = () => import("./python/child.ts");\n' },
    { rel: `${KERNEL}native/checks.ts`, text: 'import { kernelChecks } from "../checks.ts";\nimport { runChild } from "./spawn.ts";\n' },
  ])).toEqual([
    `${KERNEL}phase-check.ts -> ${KERNEL}python/backend.ts`,
    `${KERNEL}python/definitions.ts -> ${KERNEL}native/backend.ts`,
    `${KERNEL}child.ts -> ${KERNEL}native/child.ts`,
  ]);
});

/**
 * The modules of each kind's folder missing from the table of docs/spec/kernel-abi.md#per-kind (its
 * column for that kind), and the table's entries naming no module (D70): a kind's module names the
 * concern it serves.
 */
export function unlisted(files: readonly string[], doc: string): string[] {
  const start = doc.indexOf('<a id="per-kind"></a>');
  const rows = doc.slice(start, doc.indexOf("\n\n", doc.indexOf("| concern |", start))).split("\n").filter((l) => l.startsWith("| ") && !l.startsWith("| concern") && !l.startsWith("|---"));
  // the table's columns after `concern`, one per kind folder
  const columns = ["native", "python"];
  const listed = new Map(columns.map((kind) => [kind, new Set<string>()]));
  for (const row of rows) {
    const cells = row.split("|").slice(2);
    columns.forEach((kind, i) => {
      for (const m of (cells[i] ?? "").matchAll(/`([a-z0-9-]+\.ts)`/g)) listed.get(kind)!.add(m[1]!);
    });
  }
  const out: string[] = [];
  for (const f of files) {
    const kind = kindOf(f);
    if (kind === null) continue;
    const name = f.slice(`${KERNEL}${kind}/`.length);
    if (!listed.get(kind)?.has(name)) out.push(`${f}: not in docs/spec/kernel-abi.md#per-kind`);
  }
  for (const [kind, names] of listed) {
    for (const n of names) if (!files.includes(`${KERNEL}${kind}/${n}`)) out.push(`docs/spec/kernel-abi.md#per-kind lists ${kind}/${n}, which does not exist`);
  }
  return out;
}

test("every module of a kind's folder names its concern in docs/spec/kernel-abi.md#per-kind", () => {
  const doc = readFileSync(join(ROOT, "docs/spec/kernel-abi.md"), "utf8");
  const files = sources().map((f) => f.rel);
  expect(unlisted(files, doc)).toEqual([]);
  // planted: a new module of the python folder, and the table listing one that is gone
  expect(unlisted([...files, `${KERNEL}python/second-session.ts`].filter((f) => f !== `${KERNEL}native/spawn.ts`), doc)).toEqual([
    `${KERNEL}python/second-session.ts: not in docs/spec/kernel-abi.md#per-kind`,
    "docs/spec/kernel-abi.md#per-kind lists native/spawn.ts, which does not exist",
  ]);
});
