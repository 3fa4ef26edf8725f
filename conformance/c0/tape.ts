/**
 * C0 — tape semantics (docs/spec/tape.md#must-hold, "Opaque blocks") and the scalar functions the rules
 * differentiate by hand (symbolic oracle). One check per property.
 */
import * as fc from "fast-check";
import { symbolicDerivative } from "./ops.ts";
import { bitwiseEqual, compareTensors, TOL_FD, type Tolerance } from "../../oracle/compare.ts";
import { FD_METHOD, fdGradient } from "../../oracle/fd.ts";
import type { CaseOutcome, CheckDef, ProfileRuns } from "../../harness/check.ts";
import * as K from "../../src/numeric.ts";
import { add, matmul, mul, scale, sigmoid, sumReduce } from "../../src/ops/index.ts";
import { Rng, uniformTensor } from "../../src/rng.ts";
import { activeTape, registerOpaque, withTape, type OpaqueDecl } from "../../src/tape.ts";
import { Tensor } from "../../src/tensor.ts";

const RUNS: ProfileRuns = { quick: 10, default: 40, deep: 300 };
const SPEC = "docs/spec/tape.md#must-hold";

/** Tape inputs: f64, U(lo, hi). */
const randomTensor = (shape: number[], rng: Rng, lo = -1.5, hi = 1.5): Tensor => uniformTensor("f64", shape, rng, lo, hi);

const shapeSeed = fc.record({ r: fc.integer({ min: 1, max: 6 }), c: fc.integer({ min: 1, max: 6 }), seed: fc.integer({ min: 1, max: 0x7fffffff }) });
type ShapeSeed = { r: number; c: number; seed: number };

/** A test-only opaque block: y = x ⊙ x ⊙ w with named saved tensors, for C0 of the Opaque op. */
const cubeBlock: OpaqueDecl<"x" | "w", "y", "x2" | "w"> = registerOpaque({
  key: "c0.square-scale",
  inputs: ["x", "w"],
  outputs: ["y"],
  saved: ["x2", "w"],
  backward(saved, d) {
    const x2 = saved.x2, w = saved.w, dy = d.y;
    const dx = new Tensor(dy.dtype, dy.shape), dw = new Tensor(dy.dtype, dy.shape);
    // x is recovered from x2 = 2x (saved once, named) to show the backward reads saved tensors by name.
    for (let i = 0; i < dy.size; i++) {
      const x = x2.data[i]! / 2;
      dx.data[i] = 2 * x * w.data[i]! * dy.data[i]!;
      dw.data[i] = x * x * dy.data[i]!;
    }
    return { x: dx, w: dw };
  },
});

function squareScale(x: Tensor, w: Tensor, record: boolean): Tensor {
  const y = new Tensor(x.dtype, x.shape), x2 = new Tensor(x.dtype, x.shape);
  for (let i = 0; i < x.size; i++) {
    y.data[i] = x.data[i]! * x.data[i]! * w.data[i]!;
    x2.data[i] = 2 * x.data[i]!;
  }
  const tape = activeTape();
  if (record && tape !== null) tape.recordOpaque(cubeBlock.key, { x, w }, { y }, { x2, w });
  return y;
}

function opaqueCheck(c: ShapeSeed): CaseOutcome {
  const rng = new Rng(c.seed);
  const x = randomTensor([c.r, c.c], rng), w = randomTensor([c.r, c.c], rng), up = randomTensor([c.r, c.c], rng);
  const got = withTape((tape) => {
    const xp = tape.param(x), wp = tape.param(w);
    const y = squareScale(xp, wp, true);
    tape.backward(y, up);
    return { x: tape.grad(xp)!.data, w: tape.grad(wp)!.data };
  });
  const loss = () => {
    const y = squareScale(x, w, false);
    let s = 0;
    for (let i = 0; i < y.size; i++) s += y.data[i]! * up.data[i]!;
    return s;
  };
  const r = compareTensors(got, { x: fdGradient(loss, x), w: fdGradient(loss, w) }, TOL_FD);
  return { ok: r.ok, vacuous: r.vacuous, worst: r.worst, message: r.message };
}

function diamondCheck(c: ShapeSeed): CaseOutcome {
  // x = 2w ; L = sum(x ⊙ x)  ⇒  dL/dw = 8w  (the reused intermediate must accumulate both paths).
  const w = randomTensor([c.r, c.c], new Rng(c.seed));
  const g = withTape((tape) => {
    const wp = tape.param(w);
    const x = scale([wp], { c: 2 });
    const L = sumReduce([mul([x, x], {})], {});
    tape.backward(L);
    return tape.grad(wp)!.data;
  });
  const want = w.data.map((v) => 8 * v);
  const r = compareTensors({ w: g }, { w: want }, { rtol: 1e-15, atol: 0 }, 1e-6);
  return { ok: r.ok, vacuous: r.vacuous, worst: r.worst, message: r.message };
}

function chain(a: Tensor, b: Tensor): Tensor {
  return sumReduce([mul([sigmoid([matmul([a, b], {})], {}), add([matmul([a, b], {}), matmul([a, b], {})], {})], {})], {});
}

function recordingIdentityCheck(c: ShapeSeed): CaseOutcome {
  const rng = new Rng(c.seed);
  for (const dtype of ["f64", "f32"] as const) {
    const a64 = randomTensor([c.r, c.c], rng), b64 = randomTensor([c.c, c.r], rng);
    const a = dtype === "f64" ? a64 : new Tensor("f32", a64.shape, Float32Array.from(a64.data));
    const b = dtype === "f64" ? b64 : new Tensor("f32", b64.shape, Float32Array.from(b64.data));
    const plain = chain(a, b);
    const traced = withTape((tape) => chain(tape.param(a), tape.param(b)));
    if (bitwiseEqual(plain.data, traced.data) !== -1) {
      return { ok: false, message: `${dtype}: traced ${traced.data[0]} != untraced ${plain.data[0]}` };
    }
  }
  return { ok: true };
}

function snapshotCheck(c: ShapeSeed): CaseOutcome {
  const rng = new Rng(c.seed);
  const w = randomTensor([c.r, c.c], rng);
  const before = w.data.slice();
  return withTape((tape) => {
    const wp = tape.param(w);
    const y = sumReduce([mul([wp, wp], {})], {});
    for (let i = 0; i < w.size; i++) w.data[i]! += 1; // mutate the original after registration
    tape.backward(y);
    const g = tape.grad(wp)!.data;
    if (bitwiseEqual(wp.data, before) !== -1) return { ok: false, message: "the tape's snapshot changed when the original was mutated" };
    const want = before.map((v) => 2 * v);
    const r = compareTensors({ w: g }, { w: want }, { rtol: 1e-15, atol: 0 }, 1e-6);
    return { ok: r.ok, vacuous: r.vacuous, worst: r.worst, message: r.message };
  });
}

function expectThrow(what: string, f: () => unknown, mustMention: string[]): string | null {
  try {
    f();
  } catch (e) {
    const msg = e instanceof Error ? e.message : String(e);
    const missing = mustMention.filter((m) => !msg.includes(m));
    return missing.length === 0 ? null : `${what}: error "${msg}" does not mention ${missing.join(", ")}`;
  }
  return `${what}: no error raised`;
}

function rejectionsCheck(): CaseOutcome {
  const problems = [
    expectThrow("opaque key without backward", () =>
      registerOpaque({ key: "c0.no-backward", inputs: [], outputs: [], saved: [] } as unknown as OpaqueDecl), ["c0.no-backward", "backward"]),
    expectThrow("Add with mismatched shapes", () => add([new Tensor("f64", [2, 3]), new Tensor("f64", [3, 2])], {}), ["Add", "[2,3]", "[3,2]"]),
    expectThrow("Matmul with mismatched inner dims", () => matmul([new Tensor("f64", [2, 3]), new Tensor("f64", [4, 2])], {}), ["Matmul", "[2,3]", "[4,2]"]),
    expectThrow("Mul with mixed dtypes", () => mul([new Tensor("f64", [2]), new Tensor("f32", [2])], {}), ["Mul", "f64", "f32"]),
    expectThrow("second backward", () => withTape((t) => {
      const y = sumReduce([t.param(new Tensor("f64", [2]))], {});
      t.backward(y);
      t.backward(y);
    }), ["single-use"]),
  ].filter((p): p is string => p !== null);
  return problems.length === 0 ? { ok: true } : { ok: false, message: problems.join("; ") };
}

function bytesCheck(c: ShapeSeed): CaseOutcome {
  return withTape((tape) => {
    const a = tape.param(randomTensor([c.r, c.c], new Rng(c.seed)));
    const b0 = tape.bytes();
    const y = mul([a, a], {});
    const b1 = tape.bytes();
    sumReduce([y], {});
    const want0 = c.r * c.c * 8, want1 = 2 * want0;
    if (b0 !== want0 || b1 !== want1) return { ok: false, message: `bytes ${b0}, ${b1}; expected ${want0}, ${want1}` };
    return { ok: true };
  });
}

/** The scalar derivatives the hand-written backwards use, against mathjs. */
const SCALARS: { name: string; f: string; order: 1 | 2; impl: (x: number) => number }[] = [
  { name: "sigmoid'", f: "1 / (1 + exp(-x))", order: 1, impl: (x) => K.sigmoid(x) * (1 - K.sigmoid(x)) },
  { name: "softplus'", f: "log(1 + exp(x))", order: 1, impl: K.sigmoid },
  { name: "silu'", f: "x / (1 + exp(-x))", order: 1, impl: K.siluPrime },
  { name: "silu''", f: "x / (1 + exp(-x))", order: 2, impl: K.siluSecond },
];
const TOL_SYM: Tolerance = { rtol: 1e-10, atol: 1e-13, reason: "same closed form evaluated two ways in f64" };

function scalarCheck(xs: number[]): CaseOutcome {
  const got: Record<string, Float64Array> = {}, want: Record<string, Float64Array> = {};
  for (const s of SCALARS) {
    const f = symbolicDerivative(s.f, s.order);
    got[s.name] = Float64Array.from(xs, s.impl);
    want[s.name] = Float64Array.from(xs, (x) => f.evaluate({ x }) as number);
  }
  const r = compareTensors(got, want, TOL_SYM);
  return { ok: r.ok, vacuous: r.vacuous, worst: r.worst, message: r.message };
}

export function c0TapeChecks(): CheckDef<any>[] {
  const def = (name: string, spec: string, run: (c: ShapeSeed) => CaseOutcome, tol: Record<string, unknown>): CheckDef<ShapeSeed> => ({
    kind: "property", id: `C0/tape/${name}`, class: "C0", subject: { op: name === "opaque" ? "Opaque" : `tape:${name}` },
    spec, tolerance: tol, runs: RUNS, arb: shapeSeed, run,
  });
  return [
    def("opaque", "docs/spec/tape.md#opaque blocks; docs/spec/conformance.md#c0", opaqueCheck, { kind: "finite-differences", ...TOL_FD, ...FD_METHOD }),
    def("diamond-reuse", `${SPEC}: gradients accumulate (x = 2w, sum(x*x) gives dw = 8w)`, diamondCheck, { kind: "exact", rtol: 1e-15, atol: 0 }),
    def("recording-identity", `${SPEC}: opt-in, bitwise-identical values with and without a tape (f64, f32)`, recordingIdentityCheck, { kind: "bitwise" }),
    def("snapshot", `${SPEC}: parameters are snapshotted when registered`, snapshotCheck, { kind: "exact", rtol: 1e-15, atol: 0 }),
    def("bytes", `${SPEC}: memory is accounted`, bytesCheck, { kind: "exact" }),
    {
      kind: "single", id: "C0/tape/rejections", class: "C0", subject: { op: "tape:rejections" },
      spec: "docs/spec/tape.md#opaque blocks (a key with no backward is rejected at registration); ops reject mismatched shapes",
      tolerance: { kind: "error-expected" }, run: () => rejectionsCheck(),
    },
    {
      kind: "property", id: "C0/scalar/derivatives", class: "C0", subject: { op: "scalars" },
      spec: "docs/spec/conformance.md#c0 (symbolic oracle for the scalar pieces of the NL ops)",
      tolerance: { kind: "symbolic", ...TOL_SYM }, runs: RUNS,
      arb: fc.array(fc.double({ min: -8, max: 8, noNaN: true }), { minLength: 1, maxLength: 16 }),
      run: scalarCheck,
    },
  ];
}
