/**
 * bench/production-case.ts at a toy size (docs/spec/conformance.md#production-new-rules): every rule
 * with several rows per token or auxiliary inputs draws its inputs by its declaration and is judged
 * end to end (both batch elements' kernel calls, one after the other, then the judge); a usage error
 * exits 2 naming the option; a rule with two states (Titans) draws and judges both. It is a bench: nothing here times it.
 */
import { expect, test } from "bun:test";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "..");
const bench = (...args: string[]) => {
  const p = Bun.spawnSync({ cmd: [process.execPath, join(ROOT, "bench/production-case.ts"), ...args], cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode ?? -1, out: p.stdout.toString() + p.stderr.toString() };
};

// titans: a rule with a second state (its momentum S), each drawn with its own d(final state)
for (const rule of ["gated_delta_product", "dplr", "titans"]) {
  test(`${rule}: the production case runs at a toy size and passes`, () => {
    const r = bench("--rule", rule, "--T", "12", "--H", "2", "--d", "6");
    expect(r.out).toContain("verdict: pass");
    expect(r.code).toBe(0);
    // every gradient of the rule's ABI is judged (Gated DeltaProduct's dθ has n_h values per token)
    for (const g of rule === "dplr" ? ["da", "db", "dalpha"] : rule === "titans" ? ["deta", "dM_0", "dS_0"] : ["dk", "dv", "dtheta"]) expect(r.out).toMatch(new RegExp(`\\n  ${g}\\s+err`));
  }, 120_000);
}

test("an unknown rule is a usage error (exit 2) naming it", () => {
  const r = bench("--rule", "no_such_rule");
  expect(r.code).toBe(2);
  expect(r.out).toContain("no_such_rule");
}, 60_000);
