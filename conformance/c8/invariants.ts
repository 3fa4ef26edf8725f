/**
 * C8 — rule invariants (docs/spec/conformance.md#c8): each rule's declared invariants, and for every
 * frozen read, that a zero state reads zero.
 */
import type { CaseOutcome, CheckDef } from "../../harness/check.ts";
import { frozenForward } from "../../src/rules/level.ts";
import type { RuleDecl } from "../../src/rules/types.ts";
import { zeros, type Tensor } from "../../src/tensor.ts";
import { buildRuleCase } from "../../cases/rule-case.ts";
import { variants, vkey } from "../../cases/rule-variant.ts";

function zeroStateRead(decl: RuleDecl): CaseOutcome {
  const cfg = buildRuleCase(decl, { d: 5, seq_len: 3, hyper: {}, alpha: "mid", theta: "small", state: "init", seed: 7 });
  const state: Record<string, Tensor> = {};
  for (const [n, shape] of Object.entries(decl.stateShapes(cfg.cfg))) state[n] = zeros("f64", shape);
  const y = frozenForward(decl, cfg.X, cfg.params, state, cfg.cfg);
  const i = y.data.findIndex((x) => x !== 0);
  return i === -1 ? { ok: true } : { ok: false, message: `y[${i}] = ${y.data[i]} from an all-zero state` };
}

export function c8Checks(): CheckDef[] {
  const checks: CheckDef[] = [];
  for (const v of variants()) {
    const key = vkey(v);
    const subject = { rule: v.decl.key, frozen: v.frozen, dtype: "f64" as const };
    if (v.frozen) {
      checks.push({
        kind: "single", id: `C8/${key}/zero-state-reads-zero`, class: "C8", subject,
        spec: "docs/spec/conformance.md#c8; docs/spec/titans-family.md#frozen-reads (a zero frozen memory reads zero)",
        tolerance: { kind: "exact" }, run: () => zeroStateRead(v.decl),
      });
      continue;
    }
    for (const inv of v.decl.invariants) {
      const slug = inv.name.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "");
      checks.push({
        kind: "single", id: `C8/${key}/${slug}`, class: "C8", subject, spec: inv.spec, tolerance: { kind: "invariant" },
        run: () => {
          const msg = inv.check("f64", 1);
          return msg === null ? { ok: true } : { ok: false, message: msg };
        },
      });
    }
  }
  return checks;
}
