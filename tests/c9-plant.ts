/**
 * A planted PyTorch forward judged by C9, in a temporary copy of the working tree: the clean copy's
 * cross-check of `rule` (beside Delta) passes; with `from` replaced by `to` in python/nlc_torch/rules.py
 * it fails on the rule's y, and Delta stays clean. Shared by the planted-rule tests.
 */
import { expect } from "bun:test";
import { readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { copyTree, runIn } from "./tree-copy.ts";

export function expectC9FailsPlant(rule: string, from: string, to: string): void {
  const dir = copyTree(`nlc-${rule}-plant-`);
  try {
    const cross = ["conformance/c9/cross-check.ts", "--rule", `${rule},delta`, "--cases", "2", "--no-model", "--no-fixtures"];
    const clean = runIn(dir, cross);
    expect({ code: clean.code, out: clean.code === 0 ? "" : clean.out.slice(-2000) }).toEqual({ code: 0, out: "" });
    const path = join(dir, "python/nlc_torch/rules.py");
    const src = readFileSync(path, "utf8");
    const planted = src.replace(from, to);
    expect(planted).not.toBe(src);
    writeFileSync(path, planted);
    const r = runIn(dir, cross);
    expect(r.code).toBe(1);
    expect(r.out).toMatch(new RegExp(`^${rule}\\s.*FAIL: y`, "m"));
    expect(r.out).not.toMatch(/^delta\s.*(FAIL|ERROR)/m);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

