/**
 * Fixture input errors name the file and the JSON pointer of the offending field
 * (docs/spec/fixtures.md#unknown-keys): unknown config keys, values outside a hyperparameter's domain,
 * non-finite data. Each case edits a valid golden fixture in memory.
 */
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseFixture } from "../cases/fixtures/load.ts";
import { ROOT } from "../paths.ts";

const GOLDEN = join(ROOT, "fixtures", "golden");

function edited(name: string, edit: (doc: any) => void): ReturnType<typeof parseFixture> {
  const doc = JSON.parse(readFileSync(join(GOLDEN, name), "utf8"));
  edit(doc);
  return parseFixture(JSON.stringify(doc), name);
}

test("the unedited fixtures load", () => {
  expect(edited("rule-trellis.json", () => {}).ok).toBe(true);
  expect(edited("model-atlas-k1-all-active.json", () => {}).ok).toBe(true);
});

test("an unknown config key is an error naming the key", () => {
  const r = edited("rule-trellis.json", (d) => { d.config.lamda_k = 0.5; });
  expect(r.ok).toBe(false);
  if (!r.ok) {
    expect(r.error.message).toContain("/config/lamda_k");
    expect(r.error.message).toContain("unknown config key");
  }
  const m = edited("model-atlas-k1-all-active.json", (d) => { d.config.hyper = { P: 3 }; });
  expect(m.ok).toBe(false);
});

test("a hyperparameter outside its domain is an error naming it", () => {
  const r = edited("rule-trellis.json", (d) => { d.config.d_compress = 0; });
  expect(r.ok).toBe(false);
  if (!r.ok) expect(r.error.message).toContain("/config/d_compress");
});
