/**
 * The suite's schemas are compiled once and cached as standalone code under build/
 * (cases/schema-validator.ts): the cached validator must judge exactly as a fresh compile, and an
 * edited schema must never be judged by a stale cache.
 */
import { expect, test } from "bun:test";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { ROOT } from "../paths.ts";
import { cachedValidator, validatorCachePath } from "../cases/schema-validator.ts";
import { check, report } from "./synthetic-report.ts";

const SCHEMA = join(ROOT, "reports", "schema", "nlc-report.schema.json");
// The report's options plus one default spelled out: a cache path of this test's own, which no
// other test of the same process has loaded (a loaded module stays in the require cache).
const OPTIONS = { allErrors: true, strict: true, validateFormats: false, verbose: false } as const;

const good = JSON.parse(JSON.stringify(report([check("C2/moneta", "pass", { ratio: 0.5 }), check("C5/cuda/delta/forward", "skip")]))) as Record<string, unknown>;
const bad: unknown[] = [
  {},
  { ...good, format: "nlc-report/2" },
  { ...good, checks: [{ id: 7 }] },
  { ...good, summary: { passed: "many" } },
  { ...good, unknown_key: true },
];

test("a cached validator judges every document as a fresh compile does, errors included", () => {
  const text = readFileSync(SCHEMA, "utf8");
  const schema = JSON.parse(text) as object;
  const path = validatorCachePath(text, OPTIONS);
  rmSync(path, { force: true });
  const compiled = cachedValidator(text, schema, OPTIONS); // compiles, writes the cache
  expect(existsSync(path)).toBe(true);
  const cached = cachedValidator(text, schema, OPTIONS); // loads the cache
  expect(cached).not.toBe(compiled);
  for (const doc of [good, ...bad]) {
    const want = compiled(doc);
    expect(want).toBe(doc === good);
    expect(cached(doc)).toBe(want);
    expect(JSON.stringify(cached.errors ?? null)).toBe(JSON.stringify(compiled.errors ?? null));
  }
});

test("an edited schema or other options never reuse a cached validator", () => {
  const text = readFileSync(SCHEMA, "utf8");
  const edited = text.replace('"nlc-report/1"', '"nlc-report/9"');
  expect(edited).not.toBe(text);
  expect(validatorCachePath(edited, OPTIONS)).not.toBe(validatorCachePath(text, OPTIONS));
  expect(validatorCachePath(text, { ...OPTIONS, allErrors: false })).not.toBe(validatorCachePath(text, OPTIONS));
  const v = cachedValidator(edited, JSON.parse(edited) as object, OPTIONS);
  expect(v(good)).toBe(false);
  rmSync(validatorCachePath(edited, OPTIONS), { force: true });
});
