/**
 * A typo in a `py:` kernel's declaration, without the packed install of tests/install.test.ts: a
 * rule name outside the registry (the child's check, conformance/kernel/python/child.ts) and an
 * unknown declaration key (the kernel host's) each make the backend unavailable with one reason
 * naming the nearest right spelling, its checks skipped, and the run fails: it ran nothing of a
 * backend it named (docs/spec/conformance.md#nothing-ran). Skipped without PyTorch.
 */
import { expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { CheckResult } from "../harness/check.ts";
import { probeTorchSync } from "../oracle/torch-bridge.ts";
import { cli, expectUnavailable } from "./py-run.ts";

const k = (name: string) => `py:tests/py-kernels/declaration_typos.py:${name}`;
const RULE = "nlc['rules'] names 'gated-delta', which is not a rule of the registry; did you mean 'gated_delta'?";
const KEY = "tests/py-kernels/declaration_typos.py:typo_key.nlc: unknown key 'chunk_sise'; did you mean 'chunk_size'?";

test.skipIf(!probeTorchSync().available)("a typo'd rule name and an unknown declaration key: unavailable, named once, the run fails", () => {
  const dir = mkdtempSync(join(tmpdir(), "nlc-typo-"));
  try {
    const report = join(dir, "r.json");
    const p = cli(["--backend", k("typo_rule"), "--backend", k("typo_key"), "--filter", "C5/py-", "--profile", "quick", "--report", report]);
    const out = p.stdout.toString() + p.stderr.toString();
    expect(p.exitCode).toBe(1);
    // the reason once with the backend, once where the run says it tested nothing of it; no check's line repeats it
    for (const [name, text] of [["typo_rule", RULE], ["typo_key", KEY]] as const) {
      const lines = out.split("\n").filter((l) => l.includes(text));
      expect(lines.length).toBe(2);
      expect(lines[0]).toStartWith(`backend ${k(name)}: unavailable (`);
      expect(lines[1]).toStartWith(`conformance: nothing ran: backend ${k(name)} ran no check: unavailable (`);
    }
    const doc = JSON.parse(readFileSync(report, "utf8")) as { checks: CheckResult[]; run: { backends: { name: string; available: boolean; reason?: string }[] } };
    const rule = doc.checks.filter((c) => c.id.startsWith("C5/py-typo_rule/")), key = doc.checks.filter((c) => c.id.startsWith("C5/py-typo_key/"));
    expect(rule.length).toBeGreaterThan(0);
    expect(key.length).toBeGreaterThan(0);
    for (const c of rule) expectUnavailable(c, RULE);
    for (const c of key) expectUnavailable(c, KEY);
    expect(doc.run.backends.find((b) => b.name === k("typo_key"))).toMatchObject({ available: false });
    expect(doc.run.backends.find((b) => b.name === k("typo_key"))!.reason).toContain(KEY);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 120_000);
