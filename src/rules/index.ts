/** The rule registry: every rule, declared once. Adding a rule here adds all of its checks. */
import { delta } from "./delta.ts";
import { registerRuleBlocks } from "./level.ts";
import type { RuleDecl, RuleKey } from "./types.ts";

export const RULES: readonly RuleDecl[] = [delta];

for (const r of RULES) registerRuleBlocks(r);

export function ruleByKey(key: string): RuleDecl {
  const r = RULES.find((x) => x.key === key);
  if (r === undefined) throw new Error(`unknown rule '${key}' (known: ${RULES.map((x) => x.key).join(", ")})`);
  return r;
}

export type { RuleDecl, RuleKey };
