/**
 * Kernel cases of nlc-fixture/1 (docs/spec/fixtures.md#kernel-cases): the committed examples pass
 * C6's precision rule, a planted one (a gradient scaled by 1.01) fails it, and malformed documents
 * are input errors naming the JSON pointer.
 */
import { expect, test } from "bun:test";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { loadFixture, parseFixture } from "../cases/fixtures/load.ts";
import { replayFixture } from "../conformance/c6/replay.ts";
import { EXAMPLES, PLANTED, exampleRequest, kernelDoc } from "../fixtures/generate-kernel.ts";
import { formatJson } from "../cases/fixtures/json.ts";
import { ROOT } from "../paths.ts";
import { ABI } from "../ffi/abi.ts";
import { roundTo, type Precision } from "../src/precision.ts";
import { seedFromText } from "../src/rng.ts";

const EXAMPLE_DIR = join(ROOT, "fixtures", "kernel");
const files = readdirSync(EXAMPLE_DIR).filter((f) => f.endsWith(".json")).sort();

function replayFile(path: string) {
  const l = loadFixture(path);
  if (!l.ok) throw l.error;
  return replayFixture(l.fixture);
}

test("every committed kernel example loads and passes, with a bf16 one among them", () => {
  expect(files.length).toBeGreaterThanOrEqual(5);
  const dtypes = new Set<string>();
  for (const f of files) {
    const r = replayFile(join(EXAMPLE_DIR, f));
    expect(`${f}: ${r.ok ? "pass" : r.message}`).toBe(`${f}: pass`);
    dtypes.add(JSON.parse(readFileSync(join(EXAMPLE_DIR, f), "utf8")).dtype);
  }
  expect(dtypes.has("bf16")).toBe(true);
});

test("the planted fixture (one gradient scaled by 1.01) fails, flagged by the bound and by the bias test", () => {
  const path = join(ROOT, PLANTED.dir, `${PLANTED.from}-${PLANTED.tensor}-scaled.json`);
  const r = replayFile(path);
  expect(r.ok).toBe(false);
  expect(r.vacuous).toBeFalsy();
  expect(r.message).toContain(PLANTED.tensor);
  const t = (r.details as { tensors: Record<string, { err: number; bound: number; bias: boolean; slope: number }> }).tensors[PLANTED.tensor]!;
  expect(t.err).toBeGreaterThan(t.bound);
  expect(t.bias).toBe(true);
  expect(t.slope).toBeGreaterThan(0.005);
  // every other tensor of the planted case is still the correct kernel's
  for (const [name, v] of Object.entries((r.details as { tensors: Record<string, { bias: boolean }> }).tensors)) {
    if (name !== PLANTED.tensor) expect(`${name}: ${v.bias}`).toBe(`${name}: false`);
  }
});

test("the planted file is the committed example with exactly that one gradient changed", () => {
  const good = JSON.parse(readFileSync(join(EXAMPLE_DIR, `${PLANTED.from}.json`), "utf8"));
  const bad = JSON.parse(readFileSync(join(ROOT, PLANTED.dir, `${PLANTED.from}-${PLANTED.tensor}-scaled.json`), "utf8"));
  const expect1 = good.expected.grads[PLANTED.tensor].data.map((x: number) => roundTo(good.dtype, x * PLANTED.scale));
  expect(bad.expected.grads[PLANTED.tensor].data).toEqual(expect1);
  delete good.expected.grads[PLANTED.tensor];
  delete bad.expected.grads[PLANTED.tensor];
  expect(bad.inputs).toEqual(good.inputs);
  expect(bad.expected).toEqual(good.expected);
});

test("scaling any one non-zero expected tensor of any example by 1.01 fails it", () => {
  for (const f of files) {
    const doc = JSON.parse(readFileSync(join(EXAMPLE_DIR, f), "utf8"));
    const p = doc.target.precision;
    const entries: [string, { data: number[] }, string][] = [
      ["y", doc.expected.y, p.storage],
      ...Object.entries(doc.expected.state ?? {}).map(([n, t]) => [`state ${n}`, t, p.state] as [string, { data: number[] }, string]),
      ...Object.entries(doc.expected.grads).map(([n, t]) => [n, t, /^d(alpha|theta|eta|[kvqx]|omega)$/.test(n) ? p.storage : p.state] as [string, { data: number[] }, string]),
    ];
    for (const [name, t, dtype] of entries) {
      if (t.data.every((x) => x === 0)) continue; // a zero by the math (a frozen Titans read's dS) stays zero
      const orig = t.data;
      t.data = orig.map((x) => roundTo(dtype as "f32", x * 1.01));
      const l = parseFixture(JSON.stringify(doc), f);
      expect(l.ok).toBe(true);
      const r = l.ok ? replayFixture(l.fixture) : { ok: true };
      expect(`${f} ${name}: ${r.ok}`).toBe(`${f} ${name}: false`);
      t.data = orig;
    }
  }
});

/** Elements of sequence n = b·H + h of an ABI per-token tensor [B, T, H] or [B, T, H, w] scaled by `by` (rounded to `dtype`). */
function scaleSequence(t: { shape: number[]; data: number[] }, n: number, by: number, dtype: "f32" | "bf16" | "f16"): void {
  const [, T, H] = t.shape as [number, number, number], w = t.shape[3] ?? 1;
  t.data = t.data.map((x, i) => (Math.floor(i / (T * H * w)) * H + (Math.floor(i / w) % H) === n ? roundTo(dtype, x * by) : x));
}

test("one tensor scaled by 1.01 on one sequence of any example fails, naming the tensor and the sequence", () => {
  let planted = 0;
  for (const f of files) {
    const doc = JSON.parse(readFileSync(join(EXAMPLE_DIR, f), "utf8"));
    const p = doc.target.precision, n = doc.target.B * doc.target.H - 1;
    const grad = doc.target.frozen === true ? "dq" : "dk";
    for (const [name, t] of [["y", doc.expected.y], [grad, doc.expected.grads[grad]]] as [string, { shape: number[]; data: number[] }][]) {
      const orig = t.data;
      scaleSequence(t, n, 1.01, p.storage);
      expect(t.data).not.toEqual(orig);
      const l = parseFixture(JSON.stringify(doc), f);
      if (!l.ok) throw l.error;
      const r = replayFixture(l.fixture);
      expect(`${f} ${name}: ${r.ok} ${r.vacuous ?? false}`).toBe(`${f} ${name}: false false`);
      expect(r.message).toStartWith(`${name} (sequence ${n}): max |kernel - ref64|`);
      t.data = orig;
      planted++;
    }
  }
  expect(planted).toBe(2 * files.length);
});

test("the generator writes the committed emulated examples byte for byte", async () => {
  const plain = EXAMPLES.filter((e) => e.backend === undefined);
  expect(plain.length).toBeGreaterThanOrEqual(4);
  for (const e of plain) {
    const doc = await kernelDoc(exampleRequest(e));
    expect(formatJson(doc) + "\n").toBe(readFileSync(join(EXAMPLE_DIR, `${e.id}.json`), "utf8"));
  }
});

// ── input errors ──

function edited(edit: (doc: any) => void): string {
  const doc = JSON.parse(readFileSync(join(EXAMPLE_DIR, "kernel-delta-bf16.json"), "utf8"));
  edit(doc);
  const r = parseFixture(JSON.stringify(doc), "k.json");
  if (r.ok) return "loaded";
  return r.error.message;
}

test("kernel fixture input errors name the JSON pointer", () => {
  const cases: [string, (d: any) => void, string][] = [
    ["a value bf16 cannot hold", (d) => { d.inputs.k.data[3] = 0.1; }, "at /inputs/k/data/3: 0.1 is not a bf16 value"],
    ["an output bf16 cannot hold", (d) => { d.expected.grads.dq.data[0] = 1 / 3; }, "at /expected/grads/dq/data/0:"],
    ["a data length that does not fit the shape", (d) => { d.inputs.v.data.pop(); }, "at /inputs/v/data: 127 values"],
    ["a wrong ABI shape", (d) => { d.inputs.alpha.shape = [1, 2, 8]; }, "at /inputs/alpha/shape: shape [1,2,8], expected [1,8,2]"],
    ["a state with the wrong shape", (d) => { d.inputs.state.M.shape = [2, 1, 8, 8]; }, "at /inputs/state/M/shape"],
    ["an unknown key in inputs", (d) => { d.inputs.gamma = d.inputs.alpha; }, "at /inputs/gamma: unknown property"],
    ["an unknown key in the target", (d) => { d.target.C = 4; }, "at /target/C: unknown property"],
    ["an input the rule does not read", (d) => { d.inputs.eta = d.inputs.alpha; }, "at /inputs/eta: the kernel pair of 'delta' does not read 'eta'"],
    ["a missing input", (d) => { delete d.inputs.theta; }, "at /inputs: missing input 'theta'"],
    ["a missing state", (d) => { delete d.inputs.state.M; }, "at /inputs/state: missing state 'M'"],
    ["an unknown gradient", (d) => { d.expected.grads.deta = d.expected.grads.dalpha; }, "at /expected/grads/deta: unknown gradient"],
    ["an unknown state name", (d) => { d.expected.state.S = d.expected.state.M; }, "at /expected/state/S: unknown state"],
    ["dtype and storage that disagree", (d) => { d.dtype = "f16"; }, "at /dtype:"],
    ["a bad accumulate dtype", (d) => { d.target.precision.accumulate = "bf16"; }, "at /target/precision/accumulate:"],
    ["a tolerance", (d) => { d.tolerance = { rtol: 1, atol: 1 }; }, "at /tolerance:"],
    ["an unknown config key", (d) => { d.config.vocab = 4; }, "at /config/vocab: unknown config key"],
    ["an infinite number", (d) => { d.inputs.q.data[0] = Infinity; }, "at /inputs/q/data/0"],
  ];
  for (const [what, edit, want] of cases) expect(`${what}: ${edited(edit)}`).toContain(`${what}: k.json: ${want}`);
});

test("a NaN or an overflowing literal in the JSON text is an input error", () => {
  const text = readFileSync(join(EXAMPLE_DIR, "kernel-delta-bf16.json"), "utf8");
  const nan = parseFixture(text.replace('"data": [-0.265625', '"data": [NaN'), "k.json");
  expect(nan.ok).toBe(false);
  const big = parseFixture(text.replace('"data": [-0.265625', '"data": [1e999'), "k.json");
  expect(big.ok ? "loaded" : big.error.message).toContain("k.json: at /inputs/k/data/0");
});

// ── every rule variant and precision, generated ──

const PRECISIONS: readonly Precision[] = [
  { storage: "f32", state: "f32", accumulate: "f64" }, { storage: "f32", state: "f32", accumulate: "f32" },
  { storage: "bf16", state: "f32", accumulate: "f32" }, { storage: "f16", state: "f32", accumulate: "f32" },
  { storage: "bf16", state: "bf16", accumulate: "f32" },
];

test("for every rule variant and precision, an emulated correct kernel passes and one gradient scaled by 1.01 fails", async () => {
  let cases = 0, planted = 0;
  const wrong: string[] = [];
  for (const a of ABI) for (const frozen of a.frozen ? [false, true] : [false]) for (const p of PRECISIONS) {
    const what = `${a.rule}${frozen ? ".frozen" : ""} ${p.storage}/${p.state}/${p.accumulate}`;
    const doc: any = await kernelDoc({ id: "sweep", rule: a.rule, frozen, backend: "plain", order: "reversed", B: 1, H: 2, T: 6, d: 4, C: 1, seed: seedFromText(what), precision: p });
    const l = parseFixture(JSON.stringify(doc), what);
    const r = l.ok ? replayFixture(l.fixture) : { ok: false, message: l.error.message };
    cases++;
    if (!r.ok) wrong.push(`${what}: the correct kernel failed: ${r.message}`);
    for (const [name, t] of Object.entries(doc.expected.grads) as [string, { data: number[] }][]) {
      if (Math.max(...t.data.map(Math.abs)) <= 1e-3) continue; // zero by the math (a frozen Titans read's dS), or nearly
      const dt = /^d(alpha|theta|eta|[kvqxpab]|omega)$/.test(name) ? p.storage : p.state; // per-token tensors (Comba's p, DPLR's a, b too) are storage
      const orig = t.data;
      t.data = orig.map((x) => roundTo(dt, x * 1.01));
      const l2 = parseFixture(JSON.stringify(doc), what);
      const r2 = l2.ok ? replayFixture(l2.fixture) : { ok: true };
      planted++;
      if (r2.ok) wrong.push(`${what}: ${name} scaled by 1.01 passed`);
      t.data = orig;
    }
  }
  expect(wrong).toEqual([]);
  expect(cases).toBe(ABI.reduce((n, a) => n + (a.frozen ? 2 : 1), 0) * PRECISIONS.length); // every variant, every precision
  expect(planted).toBeGreaterThan(400);
}, 600_000); // a hang guard: ~500 replays take about ten seconds on a loaded two-core machine
