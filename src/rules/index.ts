/**
 * The rule registry: every rule, declared once. Adding a memory rule is one line in
 * MEMORY_RULE_DECLS; every key type, list and check is derived from these arrays.
 */
import { atlas } from "./atlas.ts";
import { comba } from "./comba.ts";
import { delta } from "./delta.ts";
import { dplr } from "./dplr.ts";
import { gated_delta } from "./gated_delta.ts";
import { gdn2 } from "./gdn2.ts";
import { gated_oja } from "./gated_oja.ts";
import { hebbian } from "./hebbian.ts";
import { gated_delta_product } from "./gated_delta_product.ts";
// the linear-attention family (docs/spec/linear-attention.md)
import { gla } from "./gla.ts";
import { rwkv6 } from "./rwkv6.ts";
import { kda } from "./kda.ts";
import { lattice } from "./lattice.ts";
import { registerRuleBlocks } from "./level.ts";
import { memora } from "./memora.ts";
import { moneta } from "./moneta.ts";
import { swa } from "./swa.ts";
import { titans } from "./titans.ts";
import { titans_linear } from "./titans_linear.ts";
import { trellis } from "./trellis.ts";
import { ttt_linear } from "./ttt_linear.ts";
import { yaad } from "./yaad.ts";
import type { RuleDecl } from "./types.ts";

/** The memory rules: any of them can be a memory level of the model. */
const MEMORY_RULE_DECLS = [delta, titans, hebbian, moneta, yaad, memora, lattice, trellis, atlas, gated_delta, kda, comba, dplr, gated_delta_product, gdn2, gated_oja,
  // the linear-attention family (docs/spec/linear-attention.md)
  gla, rwkv6,
  // TTT-Linear and Titans-linear (docs/spec/ttt.md)
  ttt_linear, titans_linear] as const;

/** Every rule: the memory rules and sliding-window attention. */
export const RULES: readonly RuleDecl[] = [...MEMORY_RULE_DECLS, swa];

export type MemoryRuleKey = (typeof MEMORY_RULE_DECLS)[number]["key"];
export type RuleKey = MemoryRuleKey | typeof swa.key;

export const MEMORY_RULES: readonly MemoryRuleKey[] = MEMORY_RULE_DECLS.map((r) => r.key);

for (const r of RULES) registerRuleBlocks(r);

export function ruleByKey(key: string): RuleDecl {
  const r = RULES.find((x) => x.key === key);
  if (r === undefined) throw new Error(`unknown rule '${key}' (known: ${RULES.map((x) => x.key).join(", ")})`);
  return r;
}

export function isMemoryRule(key: string): key is MemoryRuleKey {
  return (MEMORY_RULES as readonly string[]).includes(key);
}

export type { RuleDecl };
