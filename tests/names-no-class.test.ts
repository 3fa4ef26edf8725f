/**
 * The scheduler, the harness and the report name no check class and no backend kind
 * (docs/spec/decisions.md#names-no-class): they read what a check declares (`needs`, its
 * subject, `class` as a field) and what a kind's entry says (conformance/backend-kinds.ts). A class
 * name (C5), a backend kind's spelling (py:, lib:, cpu-emu, cuda) or an import of a check folder in
 * their code fails this test; comments may cite them. Each exception is listed with its reason.
 */
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { ROOT } from "../paths.ts";
import { NAMED_BACKENDS } from "../ffi/backends.ts";

/** The modules held to the rule: the harness, and the suite's own modules that plan, schedule and report a run. */
const AUDITED = [
  /^harness\/[^/]+\.ts$/,
  /^conformance\/(parallel|plan|settings|catalogue|run-report|report-[^/]+|delegate-worker|sweep|sweep-worker)\.ts$/,
];

/** Names that are an exception, each with its file, what it may name, and why. */
const ALLOWED: readonly { file: string; names: RegExp; reason: string }[] = [
  {
    file: "conformance/catalogue.ts", names: /^import .* from "\.\/[a-z0-9]+\/[^"]+";$/,
    reason: "the catalogue is the one list of the check folders: it imports each folder's checks (docs/contributing.md \"Adding a check class\" registers a class here)",
  },
];

/** What names a class or a kind: a class name, a kind's prefix or named build, an import of a check folder. */
const NAMES = new RegExp([
  String.raw`\bC\d+\b`,
  String.raw`(?<![\w-])(py|lib|inproc):`,
  String.raw`\bPY_PREFIX\b`,
  ...NAMED_BACKENDS.map((b) => String.raw`(?<![\w-])${b}(?![\w-])`),
  String.raw`from\s+["'](\.\/|\.\.\/conformance\/)[a-z0-9]+\/`,
].join("|"));

/** Comments cite classes and kinds freely (blanked, keeping the line numbers). */
const code = (text: string) => text.replace(/\/\*[\s\S]*?\*\//g, (m) => m.replace(/[^\n]/g, " ")).replace(/(^|[^:"'`])\/\/[^\n]*/g, "$1");

/** The audited modules' lines that name a class or a backend kind, as `file:line: text`, the exceptions aside. */
export function namings(files: readonly { rel: string; text: string }[]): string[] {
  const out: string[] = [];
  for (const { rel, text } of files) {
    if (!AUDITED.some((r) => r.test(rel))) continue;
    code(text).split("\n").forEach((line, i) => {
      const l = line.trim();
      if (!NAMES.test(l) || ALLOWED.some((a) => a.file === rel && a.names.test(l))) return;
      out.push(`${rel}:${i + 1}: ${l}`);
    });
  }
  return out;
}

function sources(): { rel: string; text: string }[] {
  const ls = Bun.spawnSync({ cmd: ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.ts"], cwd: ROOT });
  return ls.stdout.toString().split("\n").filter((f) => f !== "").map((rel) => ({ rel, text: readFileSync(resolve(ROOT, rel), "utf8") }));
}

test("the scheduler, the harness and the report name no check class and no backend kind", () => {
  const files = sources();
  for (const f of ["conformance/parallel.ts", "conformance/plan.ts", "conformance/settings.ts", "harness/report-power.ts", "harness/run.ts"]) {
    expect(files.some((x) => x.rel === f)).toBe(true);
  }
  expect(namings(files)).toEqual([]);
  // each exception is still one: a stale entry would excuse nothing
  for (const a of ALLOWED) {
    const text = code(files.find((f) => f.rel === a.file)!.text);
    expect({ file: a.file, used: text.split("\n").some((l) => a.names.test(l.trim()) && NAMES.test(l.trim())) }).toEqual({ file: a.file, used: true });
  }
});

test("the scan catches a class, a kind's prefix, a named build and a check folder's import, not a comment or an unaudited module", () => {
  const planted = [
    { rel: "conformance/parallel.ts", text: "// C5 and py: batches\nconst b = d.class === \"C5\" ? 1 : 0;\n" },
    { rel: "conformance/plan.ts", text: "/* lib: */\nif (b.startsWith(\"lib:\")) x();\n" },
    { rel: "conformance/settings.ts", text: "import { PY_PREFIX } from \"./kernel/py-plan.ts\";\n" },
    { rel: "harness/report-power.ts", text: "const named = [\"cpu-emu\", \"cuda\"];\nconst ok = \"cuda-like\";\n" },
    { rel: "conformance/catalogue.ts", text: "import { c5 } from \"./kernel/native-checks.ts\";\nconst only = f === \"C10\";\n" },
    { rel: "conformance/sweep.ts", text: "import { c9SkipReason } from \"./c9/checks.ts\";\n" },
    { rel: "conformance/kernel/native/checks.ts", text: "const c = \"C5\";\n" },
    { rel: "conformance/backend-kinds.ts", text: "const p = \"py:\";\n" },
  ];
  expect(namings(planted)).toEqual([
    "conformance/parallel.ts:2: const b = d.class === \"C5\" ? 1 : 0;",
    "conformance/plan.ts:2: if (b.startsWith(\"lib:\")) x();",
    "conformance/settings.ts:1: import { PY_PREFIX } from \"./kernel/py-plan.ts\";",
    "harness/report-power.ts:1: const named = [\"cpu-emu\", \"cuda\"];",
    "conformance/catalogue.ts:2: const only = f === \"C10\";",
    "conformance/sweep.ts:1: import { c9SkipReason } from \"./c9/checks.ts\";",
  ]);
});
