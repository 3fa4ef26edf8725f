/**
 * docs/contributing.md "Adding a backend kind", walked: in a temporary copy of the repository the guide's own
 * code is put where its steps say — the reference's pair as an in-process kernel backend
 * (`inproc:fast`) and its entry in the table of backend kinds — and each step is shown to be needed
 * and sufficient: before the entry, `--backend inproc:fast` is a usage error; after it, the walk
 * has changed at most 4 files, the catalogue lists the kind's C5 forward and backward checks for
 * every rule variant, and every one of them passes. A planted twin (its backward scales dk by 1.01)
 * fails Delta's backward and passes its forward.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../paths.ts";
import { changedFiles, copyTree, runIn, editIn } from "./tree-copy.ts";
import { RULES } from "../src/rules/index.ts";

const GUIDE = readFileSync(join(ROOT, "docs", "contributing.md"), "utf8");
const START = GUIDE.indexOf("## Adding a backend kind\n");
const STEPS = GUIDE.slice(START, GUIDE.indexOf("\n## ", START + 1));
/** The guide's code blocks in the section, in order, unindented. */
const BLOCKS = [...STEPS.matchAll(/^( *)```ts\n([\s\S]*?)^\1```$/gm)].map((m) => m[2]!.split("\n").map((l) => l.slice(m[1]!.length)).join("\n"));
const BACKEND_FILE = "conformance/kernel/native/fast-pair-backend.ts";
const KINDS_FILE = "conformance/backend-kinds.ts";

/** The rule variants of the registry, as check ids name them. */
const VARIANTS = RULES.flatMap((r) => (r.frozen === null ? [r.key] : [r.key, `${r.key}.frozen`]));

describe("docs/contributing.md \"Adding a backend kind\": what it cites", () => {
  test("it has the backend's module and the table entry as code, and the table is where it says", () => {
    expect(BLOCKS.length).toBe(2);
    expect(STEPS).toContain("`fast-pair-backend.ts`");
    expect(BLOCKS[0]).toContain("export function fastPairBackend(): KernelBackend<NativeBatch, true>");
    expect(BLOCKS[1]).toContain('import { fastPairBackend } from "./kernel/native/fast-pair-backend.ts";');
    expect(readFileSync(join(ROOT, KINDS_FILE), "utf8")).toMatch(/^export const KINDS: readonly BackendKindEntry\[\] = \[NATIVE, PYTHON, JAX\];$/m);
  });
});

describe("docs/contributing.md \"Adding a backend kind\": walked with the reference's pair as an in-process kernel", () => {
  test("each step is needed, the steps are enough, and a planted twin fails", () => {
    const dir = copyTree("nlc-add-kind-");
    try {
      // 1. the backend's module alone is not a kind yet: --backend inproc:fast is a usage error
      writeFileSync(join(dir, BACKEND_FILE), BLOCKS[0]!);
      const before = runIn(dir, ["conformance/cli.ts", "--list", "--backend", "inproc:fast"]);
      expect(before.code).toBe(2);
      expect(before.out).toContain("--backend 'inproc:fast': unknown backend");

      // 2. its entry in the table
      const [importLine, kindsLine] = BLOCKS[1]!.trim().split("\n");
      editIn(dir, KINDS_FILE, (s) => s
        .replace(/^(import .* from "\.\/kernel\/native\/in-process\.ts";)$/m, `${importLine}\n$1`)
        .replace(/^export const KINDS: readonly BackendKindEntry\[\] = \[NATIVE, PYTHON, JAX\];$/m, kindsLine!));
      expect(changedFiles(dir, [BACKEND_FILE])).toEqual([KINDS_FILE, BACKEND_FILE].sort());
      const typed = runIn(dir, ["node_modules/typescript/bin/tsc", "--noEmit"]);
      expect({ code: typed.code, out: typed.out.slice(-2000) }).toEqual({ code: 0, out: "" });

      const list = runIn(dir, ["conformance/cli.ts", "--list", "--backend", "inproc:fast", "--filter", "C5/inproc-fast/"]);
      expect(list.code).toBe(0);
      const ids = list.out.split("\n").filter((l) => l.startsWith("C5/inproc-fast/")).sort();
      expect(ids).toEqual(VARIANTS.flatMap((v) => [`C5/inproc-fast/${v}/backward`, `C5/inproc-fast/${v}/forward`]).sort());
      const unknown = runIn(dir, ["conformance/cli.ts", "--list", "--backend", "inproc:slow"]);
      expect(unknown.code).toBe(2);
      expect(unknown.out).toContain("--backend 'inproc:slow': no in-process backend 'slow' (expected inproc:<fast>)");

      // 3. every check generated for it passes
      const report = join(dir, "inproc-fast.json");
      const all = runIn(dir, ["conformance/cli.ts", "--backend", "inproc:fast", "--filter", "C5/inproc-fast/", "--seed", "1", "--report", report]);
      expect({ code: all.code, tail: all.code === 0 ? "" : all.out.slice(-3000) }).toEqual({ code: 0, tail: "" });
      const checks = JSON.parse(readFileSync(report, "utf8")).checks as { id: string; status: string }[];
      expect(checks.map((c) => c.id).sort()).toEqual(ids);
      expect(checks.filter((c) => c.status !== "pass")).toEqual([]);

      // 4. a twin whose backward scales dk by 1.01 fails Delta's backward; its forward still passes
      writeFileSync(join(dir, "conformance/kernel/native/fast-pair-twin.ts"), [
        'import type { KernelBackend } from "../../../cases/kernel-backend.ts";',
        'import { fastPairBackend } from "./fast-pair-backend.ts";',
        'import type { NativeBatch } from "./backend.ts";',
        "export function scaledTwin(): KernelBackend<NativeBatch, true> {",
        "  const b = fastPairBackend();",
        "  return { ...b, name: \"inproc:twin\", backward: (batch) => {",
        "    const r = b.backward(batch);",
        "    return { ...r, perSeq: r.perSeq.map((s) => ({ ...s, grads: { ...s.grads, ...(s.grads.k ? { k: Float32Array.from(s.grads.k, (x) => x * 1.01) } : {}) } })) };",
        "  } };",
        "}",
        "",
      ].join("\n"));
      editIn(dir, KINDS_FILE, (s) => s
        .replace('import { fastPairBackend } from "./kernel/native/fast-pair-backend.ts";', 'import { fastPairBackend } from "./kernel/native/fast-pair-backend.ts";\nimport { scaledTwin } from "./kernel/native/fast-pair-twin.ts";')
        .replace("{ fast: fastPairBackend }", "{ fast: fastPairBackend, twin: scaledTwin }"));
      const twinReport = join(dir, "inproc-twin.json");
      const twin = runIn(dir, ["conformance/cli.ts", "--backend", "inproc:twin", "--filter", "C5/inproc-twin/delta/", "--seed", "1", "--report", twinReport]);
      expect(twin.code).toBe(1);
      const byId = Object.fromEntries((JSON.parse(readFileSync(twinReport, "utf8")).checks as { id: string; status: string; message?: string }[]).map((c) => [c.id, c]));
      expect(byId["C5/inproc-twin/delta/forward"]?.status).toBe("pass");
      expect(byId["C5/inproc-twin/delta/backward"]?.status).toBe("fail");
      expect(byId["C5/inproc-twin/delta/backward"]?.message).toContain("dk");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 600_000);
});
