/**
 * docs/contributing.md "Adding a rule", walked: in a temporary copy of the repository a throwaway memory rule
 * (`echo`, Hebbian under another key, with a kernel pair) is added step by step, and each step is
 * shown to be needed and sufficient: the generator names the files the declaration makes stale,
 * then makes them current; the catalogue grows the rule's checks; the registry test fails until
 * names.md has its rows; C9 errors that rule alone until its PyTorch forward exists, then passes;
 * its kernel pair compiles (g++, the cpu-emu way) into the extern "C" pair and frozen read with
 * nothing left undefined; and the files edited by hand are the ones the guide names, as many as it
 * says. Also, for every registered rule, the files, anchors and names the steps cite exist. The
 * PyTorch runs are skipped without python3 + torch.
 */
import { describe, expect, test } from "bun:test";
import { readFileSync, rmSync, writeFileSync, existsSync } from "node:fs";
import { join, relative } from "node:path";
import { generatedFiles } from "../ffi/generate.ts";
import { ROOT } from "../paths.ts";
import { changedFiles, copyTree, runIn, editIn } from "./tree-copy.ts";
import { RULES, isMemoryRule } from "../src/rules/index.ts";
import { probeTorchSync } from "../oracle/torch-bridge.ts";

const GUIDE = readFileSync(join(ROOT, "docs", "contributing.md"), "utf8");
/** Whether the rule has its (optional) kernel pair, cuda/<key>.cu. */
const hasKernelPair = (key: string): boolean => existsSync(join(ROOT, "cuda", `${key}.cu`));
const STEPS = GUIDE.slice(GUIDE.indexOf("## Adding a rule\n"), GUIDE.indexOf("\n## ", GUIDE.indexOf("## Adding a rule\n") + 1));
const torch = probeTorchSync();
/** The file of the throwaway rule's math (its anchor exists only in the copy, so it is not written here as one citation). */
const ECHO_SHEET = "docs/spec/titans-family.md";
const NUMBERS: Record<string, number> = { four: 4, five: 5, six: 6, seven: 7, eight: 8, nine: 9 };
/** The guide's count of files edited by hand, without and with a kernel pair, and the files it names. */
const HAND = /Files edited by hand: (\w+) \(([^)]*)\); with a kernel pair, (\w+) \(and ([^)]*)\)/.exec(STEPS);
const named = (list: string) => [...list.matchAll(/`([^`]+\.[a-z]+)`/g)].map((m) => m[1]!.replace(/<key>/g, "echo"));

/** g++ -c of a .cu of dir as the cpu-emu build compiles it (ffi/build.ts), at -O0; the defined and undefined symbols. */
function compileCu(dir: string, src: string): { code: number; out: string; defined: string[]; undefined: string[] } {
  const obj = join(dir, `${src}.o`);
  const cc = Bun.spawnSync({ cmd: ["g++", "-std=c++20", "-O0", "-fPIC", "-fvisibility=hidden", "-Wall", "-Wextra", "-Werror", "-pthread", "-x", "c++", "-Icuda", "-c", src, "-o", obj], cwd: dir, stdout: "pipe", stderr: "pipe" });
  if (cc.exitCode !== 0) return { code: cc.exitCode ?? -1, out: cc.stderr.toString().slice(-2000), defined: [], undefined: [] };
  // nm -C: "<address> <type> <demangled name>", the name possibly with spaces
  const symbols = (flag: string) => Bun.spawnSync({ cmd: ["nm", "-C", flag, obj], stdout: "pipe" }).stdout.toString().split("\n")
    .map((l) => /^\s*[0-9a-f]*\s+(\w) (.+)$/.exec(l)).filter((m) => m !== null).map((m) => ({ type: m[1]!, name: m[2]! }));
  const defined = symbols("--defined-only").filter((x) => x.type === "T").map((x) => x.name);
  const undef = symbols("--undefined-only").map((x) => x.name);
  rmSync(obj);
  return { code: 0, out: "", defined, undefined: undef };
}

describe("docs/contributing.md \"Adding a rule\": what it cites", () => {
  test("every file it names exists, for every registered memory rule", () => {
    const paths = [...STEPS.matchAll(/`((?:src|ffi|python|docs|cuda|tests)\/[^`\s]+|gen\/[^`\s]+)`/g)].map((m) => m[1]!);
    expect(paths.length).toBeGreaterThan(10);
    const missing: string[] = [];
    for (const rule of RULES.filter((r) => isMemoryRule(r.key))) {
      // the kernel pair is optional (step 6: C5 skips a rule its library does not export)
      const kernel = hasKernelPair(rule.key);
      for (const p of paths) {
        const path = p.startsWith("gen/") ? `cuda/${p}` : p;
        if (!kernel && path.startsWith("cuda/")) continue;
        const concrete = path.replace(/<key>/g, rule.key);
        if (!existsSync(join(ROOT, concrete))) missing.push(concrete);
      }
    }
    expect(missing).toEqual([]);
  });

  test("a generated file is named only in the step that runs the generator, never as one to edit", () => {
    // names.md is generated in part (its hyperparameter tables) and edited by hand elsewhere
    const generated = [...generatedFiles().keys()].map((p) => relative(ROOT, p)).filter((p) => !p.startsWith("cuda/gen/") && p !== "docs/spec/names.md");
    const steps = STEPS.split(/\n(?=\d+\. )/).filter((s) => /^\d+\. /.test(s));
    expect(steps.length).toBeGreaterThan(4);
    for (const step of steps) {
      const cited = generated.filter((g) => step.includes(`\`${g}\``));
      if (cited.length > 0) expect({ cited, step: step.slice(0, 60), runsGenerator: step.includes("ffi/generate.ts") }).toEqual({ cited, step: step.slice(0, 60), runsGenerator: true });
    }
  });

  test("the anchors it links exist", () => {
    for (const [, file, anchor] of STEPS.matchAll(/\]\(([^)#]+)#([^)]+)\)/g)) {
      expect({ file, anchor, found: readFileSync(join(ROOT, "docs", file!), "utf8").includes(`<a id="${anchor}"></a>`) }).toEqual({ file, anchor, found: true });
    }
  });

  test("the names it cites are where it says, and every registered rule is in each of them", () => {
    const index = readFileSync(join(ROOT, "src/rules/index.ts"), "utf8");
    const decls = /const MEMORY_RULE_DECLS = \[([^\]]+)\]/.exec(index)?.[1] ?? "";
    const rulesPy = readFileSync(join(ROOT, "python/nlc_torch/rules.py"), "utf8");
    const dict = (name: string) => new RegExp(`^${name} = \\{([^}]+)\\}`, "m").exec(rulesPy)?.[1] ?? "";
    const cudaReadme = readFileSync(join(ROOT, "cuda/README.md"), "utf8");
    expect(STEPS).toContain("`MEMORY_RULE_DECLS`");
    for (const name of ["INNER", "FROZEN", "INIT"]) expect(STEPS).toContain(`\`${name}\``);
    expect(JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")).scripts["fixtures:generate"]).toBeDefined();
    for (const rule of RULES.filter((r) => isMemoryRule(r.key))) {
      const k = rule.key;
      expect({ k, registered: new RegExp(`\\b${k}\\b`).test(decls) }).toEqual({ k, registered: true });
      expect({ k, inner: dict("INNER").includes(`"${k}":`), frozen: dict("FROZEN").includes(`"${k}":`) }).toEqual({ k, inner: true, frozen: true });
      if (hasKernelPair(k)) expect({ k, cudaRow: cudaReadme.includes(`\`${k}.cu\``) }).toEqual({ k, cudaRow: true });
    }
  });
});

describe("docs/contributing.md \"Adding a rule\": walked with a throwaway rule", () => {
  test("each step is needed, and the steps are enough", () => {
    const dir = copyTree("nlc-add-rule-");
    try {
      // 1. declare it
      writeFileSync(join(dir, "src/rules/echo.ts"),
        `import { hebbian } from "./hebbian.ts";\nimport type { RuleDecl } from "./types.ts";\n\nexport const echo: RuleDecl<"echo"> = { ...hebbian, key: "echo", sheet: "${ECHO_SHEET}#echo" };\n`);
      // 2. register it
      editIn(dir, "src/rules/index.ts", (s) => s
        .replace('import { delta } from "./delta.ts";', 'import { delta } from "./delta.ts";\nimport { echo } from "./echo.ts";')
        .replace(/const MEMORY_RULE_DECLS = \[([^\]]+)\]/, (_m, list: string) => `const MEMORY_RULE_DECLS = [${list}, echo]`));
      const list = runIn(dir, ["conformance/cli.ts", "--list", "--filter", "echo"]);
      expect(list.code).toBe(0);
      const classes = new Set(list.out.split("\n").filter((l) => /^C\d\//.test(l)).map((l) => l.split("/")[0]));
      for (const c of ["C1", "C2", "C3", "C4", "C7", "C8", "C9"]) expect({ c, listed: classes.has(c) }).toEqual({ c, listed: true });

      // 4. generate: the declaration makes the generated files stale, the generator makes them current
      const stale = runIn(dir, ["ffi/generate.ts", "--check"]);
      expect(stale.code).toBe(1);
      for (const f of ["ffi/nlk.h", "ffi/abi.gen.ts", "python/nlc_torch/rules_meta.json", "docs/spec/names.md"]) expect(stale.out).toContain(f);
      expect(runIn(dir, ["ffi/generate.ts"]).code).toBe(0);
      expect(runIn(dir, ["ffi/generate.ts", "--check"]).code).toBe(0);
      expect(readFileSync(join(dir, "ffi/nlk.h"), "utf8")).toContain("nlk_echo_forward(");
      expect(existsSync(join(dir, "cuda/gen/echo_pair.inc"))).toBe(true);
      expect(JSON.parse(readFileSync(join(dir, "python/nlc_torch/rules_meta.json"), "utf8")).rules.map((r: { key: string }) => r.key)).toContain("echo");

      // 3. its math (a section its sheet cites), and names.md: the registry test fails until the rule's rows are there
      editIn(dir, ECHO_SHEET, (s) => `${s}\n<a id="echo"></a>\n## Echo\n\nThe Hebbian rule (§4) under another key.\n`);
      const registry = ["test", "tests/rule-registry.test.ts"];
      expect(runIn(dir, registry).code).not.toBe(0);
      editIn(dir, "docs/spec/names.md", (s) => s
        .replace(/^( {4}delta .*swa)$/m, "$1  echo")
        .replace(/^(\| `hebbian` \| `W_K, W_V, W_Q` \| alpha \| \|)$/m, "$1\n| `echo` | `W_K, W_V, W_Q` | alpha | |")
        .replace(/^(\| `hebbian` \| `M` \| `\[d, d\]` \| zeros \| `M` \|)$/m, "$1\n| `echo` | `M` | `[d, d]` | zeros | `M` |"));
      const after = runIn(dir, registry);
      expect({ code: after.code, out: after.code === 0 ? "" : after.out.slice(-2000) }).toEqual({ code: 0, out: "" });

      // 5. the PyTorch forward: without it C9 errors this rule alone, naming it; with it, C9 passes
      const cross = ["conformance/c9/cross-check.ts", "--rule", "echo,hebbian", "--cases", "1", "--no-model", "--no-fixtures"];
      if (torch.available) {
        const missing = runIn(dir, cross);
        expect(missing.code).toBe(1);
        expect(missing.out).toContain("no forward of rule 'echo'");
        expect(missing.out).not.toMatch(/hebbian\s+ERROR/);
      }
      editIn(dir, "python/nlc_torch/rules.py", (s) => `${s}\nINNER["echo"] = _hebbian\nFROZEN["echo"] = _matrix_read\n`);
      if (torch.available) {
        const present = runIn(dir, cross);
        expect({ code: present.code, out: present.code === 0 ? "" : present.out.slice(-2000) }).toEqual({ code: 0, out: "" });
      }
      const generated = new Set([...generatedFiles().keys()].map((p) => relative(ROOT, p)).filter((p) => p !== "docs/spec/names.md"));
      const handEdited = () => changedFiles(dir, ["src/rules/echo.ts", "cuda/echo.cu"]).filter((f) => !generated.has(f));
      expect(HAND).not.toBeNull();
      const [, without, listed, withKernel, kernelListed] = HAND!;
      expect(handEdited()).toEqual([...named(listed!), ECHO_SHEET].sort());
      expect(handEdited().length).toBe(NUMBERS[without!] ?? -1);

      // 6. its kernel pair: the .cu including gen/echo_pair.inc, its row in cuda/README.md; the frozen
      // read is the shared matrix read, which the generated gen/matrix_frozen.inc already lists
      expect(readFileSync(join(dir, "cuda/gen/matrix_frozen.inc"), "utf8")).toContain("NLK_MATRIX_FROZEN(echo, nullptr)");
      writeFileSync(join(dir, "cuda/echo.cu"), readFileSync(join(dir, "cuda/hebbian.cu"), "utf8").replace(/hebbian/g, "echo").replace(/Hebbian/g, "Echo"));
      editIn(dir, "cuda/README.md", (s) => s.replace(/^(\| `hebbian\.cu`.*)$/m, "$1\n| `echo.cu` (+ `matrix.cuh`) | Echo: the Hebbian pair under another key | ported |"));
      const pair = compileCu(dir, "cuda/echo.cu"), frozen = compileCu(dir, "cuda/matrix_frozen.cu");
      expect({ code: pair.code, out: pair.out }).toEqual({ code: 0, out: "" });
      expect({ code: frozen.code, out: frozen.out }).toEqual({ code: 0, out: "" });
      for (const f of ["nlk_echo_workspace_bytes", "nlk_echo_forward", "nlk_echo_backward"]) expect({ f, defined: pair.defined.includes(f) }).toEqual({ f, defined: true });
      for (const f of ["nlk_echo_frozen_forward", "nlk_echo_frozen_backward"]) expect({ f, defined: frozen.defined.includes(f) }).toEqual({ f, defined: true });
      // every launcher the wrappers call is defined in the .cu itself
      expect(pair.undefined.filter((n) => n.includes("nlk::echo::"))).toEqual([]);
      expect(handEdited()).toEqual([...named(listed!), ECHO_SHEET, ...named(kernelListed!)].sort());
      expect(handEdited().length).toBe(NUMBERS[withKernel!] ?? -1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 600_000);
});
