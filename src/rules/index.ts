/** The rule registry: every rule, declared once. Adding a rule here adds all of its checks. */
import { atlas } from "./atlas.ts";
import { delta } from "./delta.ts";
import { hebbian } from "./hebbian.ts";
import { lattice } from "./lattice.ts";
import { registerRuleBlocks } from "./level.ts";
import { memora } from "./memora.ts";
import { moneta } from "./moneta.ts";
import { swa } from "./swa.ts";
import { titans } from "./titans.ts";
import { trellis } from "./trellis.ts";
import { yaad } from "./yaad.ts";
import type { RuleDecl, RuleKey } from "./types.ts";

export const RULES: readonly RuleDecl[] = [delta, titans, hebbian, atlas, lattice, trellis, moneta, yaad, memora, swa];

for (const r of RULES) registerRuleBlocks(r);

export function ruleByKey(key: string): RuleDecl {
  const r = RULES.find((x) => x.key === key);
  if (r === undefined) throw new Error(`unknown rule '${key}' (known: ${RULES.map((x) => x.key).join(", ")})`);
  return r;
}

export type { RuleDecl, RuleKey };
