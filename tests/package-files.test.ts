/**
 * The published package (docs/spec/decisions.md, the package's files): `npm pack --dry-run` holds
 * every module the command imports (the closure of conformance/cli.ts) and the Python it starts,
 * and nothing a user does not need: no tests, benchmarks, CI scripts of this repository or reports
 * other than the report schema. The closure walk is shown to catch a module left out. The release
 * workflow publishes on a version tag with provenance and attaches the report.
 */
import { expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { ROOT } from "../paths.ts";

const hasNpm = Bun.spawnSync({ cmd: ["npm", "--version"], stdout: "pipe", stderr: "pipe" }).exitCode === 0;

/** The files `npm pack` would put in the tarball, relative to the repository root. */
function packed(): Set<string> {
  const r = Bun.spawnSync({ cmd: ["npm", "pack", "--dry-run", "--json", "--offline"], cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  if (r.exitCode !== 0) throw new Error(`npm pack --dry-run failed:\n${r.stderr.toString()}`);
  const [info] = JSON.parse(r.stdout.toString()) as { files: { path: string }[] }[];
  return new Set(info!.files.map((f) => f.path));
}

/** The repository's own modules that `entry` imports, transitively (relative paths). */
function closure(entry: string): Set<string> {
  const transpiler = new Bun.Transpiler({ loader: "ts" });
  const seen = new Set<string>();
  const todo = [resolve(ROOT, entry)];
  while (todo.length > 0) {
    const file = todo.pop()!;
    const rel = relative(ROOT, file);
    if (seen.has(rel)) continue;
    seen.add(rel);
    for (const { path } of transpiler.scanImports(readFileSync(file, "utf8").replace(/^#!.*/, ""))) {
      if (!path.startsWith(".")) continue; // a dependency's or Bun's own
      const target = resolve(dirname(file), path);
      if (existsSync(target) && /\.(ts|js)$/.test(target)) todo.push(target);
    }
  }
  return seen;
}

/** What of `need` the package lacks, and what it holds that no user needs. */
function problems(files: Set<string>, need: Iterable<string>): string[] {
  const out: string[] = [];
  for (const f of need) if (!files.has(f)) out.push(`missing: ${f}`);
  for (const f of files) {
    if (/^(tests|bench|\.ci|\.github)\//.test(f) || /\.test\.ts$/.test(f)) out.push(`not for users: ${f}`);
    if (/(^|\/)build\/|\.egg-info\/|__pycache__\//.test(f)) out.push(`build output: ${f}`);
    if (f.startsWith("reports/") && !f.startsWith("reports/schema/")) out.push(`not for users: ${f}`);
  }
  return out;
}

test.skipIf(!hasNpm)("the package holds what the command runs and nothing of this repository's own upkeep", () => {
  const files = packed();
  const host = ["kernel_host", "kernel_declaration", "kernel_layout", "kernel_calls", "kernel_probes"].map((m) => `python/nlc_torch/${m}.py`);
  const need = [...closure("conformance/cli.ts"), "bin/nlc.js", "python/nlc_zygote.py", ...host, "reports/schema/nlc-report.schema.json", "README.md"];
  expect(problems(files, need)).toEqual([]);
  expect(closure("conformance/cli.ts").size).toBeGreaterThan(100);

  // planted: a module of the closure left out, and a test file let in, are each named
  const planted = new Set(files);
  planted.delete("harness/report.ts");
  planted.add("tests/install.test.ts");
  expect(problems(planted, need)).toEqual(["missing: harness/report.ts", "not for users: tests/install.test.ts"]);
}, 120_000);

test("the package is publishable: not private, its command and files declared", () => {
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8"));
  expect(pkg.private).toBeUndefined();
  expect(pkg.bin).toEqual({ nlc: "bin/nlc.js" });
  expect(existsSync(join(ROOT, pkg.bin.nlc))).toBe(true);
});

test("the release workflow publishes on a version tag with provenance and attaches the report", () => {
  const wf = Bun.YAML.parse(readFileSync(join(ROOT, ".github", "workflows", "release.yml"), "utf8")) as {
    on: { push: { tags: string[] } };
    jobs: Record<string, { permissions: Record<string, string>; steps: { run?: string }[] }>;
  };
  expect(wf.on.push.tags).toEqual(["v*"]);
  const job = Object.values(wf.jobs)[0]!;
  expect(job.permissions["id-token"]).toBe("write");
  const runs = job.steps.map((s) => s.run ?? "").join("\n");
  expect(runs).toContain("npm publish --provenance");
  expect(runs).toContain("bash .ci/run");
  expect(runs).toMatch(/gh release upload "\$GITHUB_REF_NAME" \$assets/);
  expect(runs).toContain("reports/conformance.json");
});
