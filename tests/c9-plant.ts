/**
 * A planted PyTorch forward judged by C9, in a temporary copy of the working tree: the clean copy's
 * cross-check of `rule` (beside Delta) passes; with `from` replaced by `to` in python/nlc_torch/rules.py
 * it fails on the rule's y, and Delta stays clean. Shared by the planted-rule tests.
 */
import { expect } from "bun:test";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { ROOT } from "../paths.ts";

export function expectC9FailsPlant(rule: string, from: string, to: string): void {
  const dir = copyTree(`nlc-${rule}-plant-`);
  try {
    const cross = ["conformance/c9/cross-check.ts", "--rule", `${rule},delta`, "--cases", "2", "--no-model", "--no-fixtures"];
    const clean = run(dir, cross);
    expect({ code: clean.code, out: clean.code === 0 ? "" : clean.out.slice(-2000) }).toEqual({ code: 0, out: "" });
    const path = join(dir, "python/nlc_torch/rules.py");
    const src = readFileSync(path, "utf8");
    const planted = src.replace(from, to);
    expect(planted).not.toBe(src);
    writeFileSync(path, planted);
    const r = run(dir, cross);
    expect(r.code).toBe(1);
    expect(r.out).toMatch(new RegExp(`^${rule}\\s.*FAIL: y`, "m"));
    expect(r.out).not.toMatch(/^delta\s.*(FAIL|ERROR)/m);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** A temporary copy of the working tree (tracked and untracked, not ignored files), node_modules linked. */
function copyTree(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const ls = Bun.spawnSync({ cmd: ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd: ROOT, stdout: "pipe" });
  for (const f of ls.stdout.toString().split("\0").filter((f) => f !== "")) {
    if (!existsSync(join(ROOT, f))) continue;
    mkdirSync(dirname(join(dir, f)), { recursive: true });
    copyFileSync(join(ROOT, f), join(dir, f));
  }
  symlinkSync(join(ROOT, "node_modules"), join(dir, "node_modules"));
  return dir;
}

function run(dir: string, args: string[]): { code: number; out: string } {
  const p = Bun.spawnSync({ cmd: [process.execPath, ...args], cwd: dir, stdout: "pipe", stderr: "pipe", env: { ...process.env, NLC_SERIAL: "1" } });
  return { code: p.exitCode ?? -1, out: p.stdout.toString() + p.stderr.toString() };
}
