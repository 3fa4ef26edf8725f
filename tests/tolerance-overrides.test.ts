/**
 * The tolerance overrides (docs/spec/tolerances.md#overrides) against what the checks declare: every
 * check whose tolerance record carries a reason (a departure from the policy) has its row in the
 * table, with the same bound, and every row's bound is one some check of its class declares (a
 * C8 invariant's bound is declared with the rule's invariant, in src/rules).
 */
import { describe, expect, test } from "bun:test";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../paths.ts";
import { buildCatalogue } from "../conformance/catalogue.ts";
import { catalogueSettings, ENV_NAMES } from "../conformance/plan.ts";

const DOC = readFileSync(join(ROOT, "docs/spec/tolerances.md"), "utf8");

/** Numbers written in a text, not those that are part of a name (f32, ref64, L2). */
function numbers(text: string): number[] {
  return [...text.matchAll(/(?<![\w.])\d+(?:\.\d+)?(?:e[-+]?\d+)?(?![\w.])/gi)].map((m) => Number(m[0]));
}

interface Row { cls: string; check: string; bound: string; nums: number[] }

function overrideRows(): Row[] {
  const start = DOC.indexOf('<a id="overrides"></a>');
  const lines = DOC.slice(start).split("\n");
  const first = lines.findIndex((l) => l.startsWith("|"));
  const rows: Row[] = [];
  for (const l of lines.slice(first + 2)) {
    if (!l.startsWith("|")) break;
    const [check, bound] = l.slice(1, -1).split(/(?<!\\)\|/).map((c) => c.trim());
    rows.push({ cls: check!.split(/\s/)[0]!, check: check!, bound: bound!, nums: numbers(bound!.replace(/`/g, "")) });
  }
  return rows;
}

interface Declared { cls: string; kind: string; nums: number[]; reason: string | null }

/** A record and every nested record with a reason of its own (e.g. C0's symbolic bound inside its FD record). */
function declared(cls: string, t: Record<string, unknown>, out: Declared[]): void {
  const own = Object.fromEntries(Object.entries(t).filter(([, v]) => typeof v !== "object" || v === null || Array.isArray(v)));
  out.push({ cls, kind: String(t.kind ?? ""), nums: numbers(JSON.stringify(own)), reason: typeof t.reason === "string" ? t.reason : null });
  for (const v of Object.values(t)) if (typeof v === "object" && v !== null && !Array.isArray(v) && "reason" in v) declared(cls, v as Record<string, unknown>, out);
}

function matches(row: Row, d: Declared): boolean {
  if (row.cls !== d.cls) return false;
  if (row.nums.length === 0) return row.bound.split(/\W+/).some((w) => w.length > 3 && d.kind.includes(w));
  return row.nums.every((n) => d.nums.includes(n));
}

describe("tolerance overrides", () => {
  const rows = overrideRows();
  const all: Declared[] = [];
  for (const c of buildCatalogue(catalogueSettings({ fixtureDirs: [], names: ENV_NAMES })).checks) declared(c.class, c.tolerance as Record<string, unknown>, all);

  test("every declared departure (a tolerance with a reason) has its row, with its bound", () => {
    expect(rows.length).toBeGreaterThan(5);
    const seen = new Set<string>();
    const missing: string[] = [];
    for (const d of all.filter((x) => x.reason !== null)) {
      const key = `${d.cls} ${d.kind} ${d.nums.join(",")}: ${d.reason}`;
      if (seen.has(key)) continue;
      seen.add(key);
      if (!rows.some((r) => matches(r, d))) missing.push(key);
    }
    expect(missing).toEqual([]);
  });

  test("every row's bound is declared by a check of its class", () => {
    const rulesSrc = readdirSync(join(ROOT, "src/rules")).map((f) => readFileSync(join(ROOT, "src/rules", f), "utf8")).join("\n");
    const orphan = rows.filter((r) => {
      if (all.some((d) => matches(r, d))) return false;
      // a C8 invariant's bound lives in the rule's declared invariant
      if (r.cls === "C8" && all.some((d) => d.cls === "C8" && d.kind === "invariant")) return !r.nums.every((n) => numbers(rulesSrc).includes(n));
      return true;
    }).map((r) => `${r.check}: ${r.bound}`);
    expect(orphan).toEqual([]);
  });
});
