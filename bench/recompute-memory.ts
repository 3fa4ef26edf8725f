/**
 * Tape memory per save policy (docs/spec/chunk-forms.md#recompute-memory): the bytes the tape
 * holds after recording one rule block at d = 64, s = 256 (f64), under store-all, recompute and
 * checkpoint every 16 tokens. Accounting only, no timing. Writes reports/recompute-memory.json and
 * prints a markdown table. Usage: npx bun bench/recompute-memory.ts [--d N] [--s N]
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { buildRuleCase } from "../cases/rule-case.ts";
import { ROOT } from "../paths.ts";
import { policyName, STORE_ALL, type SavePolicy } from "../src/recompute.ts";
import { RULES } from "../src/rules/index.ts";
import { paramNames, ruleForward } from "../src/rules/level.ts";
import { restartable } from "../src/rules/rule-recompute.ts";
import { withTape } from "../src/tape.ts";

function arg(name: string, dflt: number): number {
  const i = process.argv.indexOf(name);
  if (i < 0) return dflt;
  const v = Number(process.argv[i + 1]);
  if (!Number.isInteger(v) || v < 1) {
    console.error(`${name}: expected a positive integer, got ${process.argv[i + 1]}`);
    process.exit(2);
  }
  return v;
}

const d = arg("--d", 64), s = arg("--s", 256);
const POLICIES: SavePolicy[] = [STORE_ALL, { kind: "recompute" }, { kind: "checkpoint", every: 16 }];

const rows: Record<string, unknown>[] = [];
console.log(`| rule | ${POLICIES.map(policyName).join(" | ")} | recompute saves | checkpoint-16 saves |`);
console.log(`|---|${POLICIES.map(() => "---:").join("|")}|---:|---:|`);
for (const decl of RULES) {
  const c = buildRuleCase(decl, { d, seq_len: s, hyper: {}, alpha: "mid", theta: "small", state: "random", seed: 7 });
  const bytes = POLICIES.map((p) => withTape((tape) => {
    const X = tape.input(c.X);
    const params = Object.fromEntries(paramNames(decl).map((n) => [n, tape.param(c.params[n]!)]));
    ruleForward(decl, X, params, c.state, c.cfg);
    return tape.bytes();
  }, p));
  const mib = (b: number) => (b / 2 ** 20).toFixed(2);
  const pct = (b: number) => `${(100 * (1 - b / bytes[0]!)).toFixed(1)}%`;
  console.log(`| ${decl.key}${restartable(decl) ? "" : " (no restart)"} | ${bytes.map(mib).join(" | ")} | ${pct(bytes[1]!)} | ${pct(bytes[2]!)} |`);
  rows.push({ rule: decl.key, restartable: restartable(decl), ...Object.fromEntries(POLICIES.map((p, i) => [policyName(p), bytes[i]])) });
}
console.log(`(MiB held by the tape after the forward, f64, d = ${d}, s = ${s})`);
mkdirSync(join(ROOT, "reports"), { recursive: true });
writeFileSync(join(ROOT, "reports", "recompute-memory.json"), JSON.stringify({ d, seq_len: s, dtype: "f64", rows }, null, 2));
