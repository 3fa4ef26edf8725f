/**
 * C0 — op VJPs (docs/spec/conformance.md#c0, docs/spec/tape.md#ops). Generated from the op declarations: for every
 * op, fast-check draws shapes, values and attributes; the tape's VJP must match central finite
 * differences in f64 and, for elementwise ops, the mathjs symbolic derivative.
 */
import * as fc from "fast-check";
import type { EvalFunction } from "mathjs";
import { compareTensors, TOL_FD, type Comparison, type Tolerance } from "../../oracle/compare.ts";
import { FD_METHOD, fdGradient } from "../../oracle/fd.ts";
import type { CheckDef, ProfileRuns } from "../../harness/check.ts";
import { allOps, type OpDecl } from "../../src/ops/index.ts";
import { apply, type OpSample } from "../../src/ops/define.ts";
import { Rng } from "../../src/rng.ts";
import { withTape } from "../../src/tape.ts";
import { Tensor } from "../../src/tensor.ts";
import { opSampleArb } from "../../cases/ops.ts";

const RUNS: ProfileRuns = { quick: 10, default: 40, deep: 300 };
/** Symbolic vs tape: both evaluate the same closed form in f64; only rounding separates them. */
const TOL_SYMBOLIC: Tolerance = { rtol: 1e-10, atol: 1e-12, reason: "same closed form evaluated two ways in f64" };

interface OpCase {
  sample: OpSample<unknown>;
  seed: number;
}

function opCaseArb(op: OpDecl<unknown>): fc.Arbitrary<OpCase> {
  return fc.record({
    sample: opSampleArb(op),
    seed: fc.integer({ min: 1, max: 0x7fffffff }),
  });
}

/** Values away from 0 in magnitude for positive domains; reals in [-1.5, 1.5]. */
function makeInputs(c: OpCase): { inputs: Tensor[]; weight: (n: number[]) => Tensor; rng: Rng } {
  const rng = new Rng(c.seed);
  const inputs = c.sample.shapes.map((shape, i) => {
    const t = new Tensor("f64", shape);
    const positive = c.sample.domains[i] === "positive";
    for (let j = 0; j < t.size; j++) t.data[j] = positive ? rng.uniform(0.1, 2) : rng.uniform(-1.5, 1.5);
    return t;
  });
  const weight = (shape: number[]) => {
    const w = new Tensor("f64", shape);
    for (let j = 0; j < w.size; j++) w.data[j] = rng.uniform(0.5, 1.5) * (rng.next() < 0.5 ? -1 : 1);
    return w;
  };
  return { inputs, weight, rng };
}

/** Tape gradients of sum(out ⊙ w) w.r.t. every input, seeded with an explicit upstream gradient. */
function tapeGrads(op: OpDecl<unknown>, inputs: Tensor[], attrs: unknown, w: Tensor): Record<string, Float64Array> {
  return withTape((tape) => {
    const xs = inputs.map((x) => tape.param(x));
    // `apply` is the entry point every exported op goes through, so recording is exercised.
    const out = apply(op, xs, attrs);
    tape.backward(out, w);
    const g: Record<string, Float64Array> = {};
    xs.forEach((x, i) => {
      const gi = tape.grad(x);
      g[`x${i}`] = gi === null ? new Float64Array(x.size) : Float64Array.from(gi.data);
    });
    return g;
  });
}

const derivatives = new Map<string, EvalFunction>();
/** mathjs' derivative of an expression in x, compiled once per expression. */
export function symbolicDerivative(expr: string, order: 1 | 2 = 1): EvalFunction {
  const key = `${order}:${expr}`;
  let f = derivatives.get(key);
  if (f === undefined) {
    // mathjs is loaded on first use: importing it costs about a CPU second, and most processes
    // (the CLI's supervisor, worker threads, kernel children, a filtered run) never need it.
    const { derivative } = require("mathjs") as typeof import("mathjs");
    let node = derivative(expr, "x");
    if (order === 2) node = derivative(node, "x");
    f = node.compile();
    derivatives.set(key, f);
  }
  return f;
}

function runOpCase(op: OpDecl<unknown>, c: OpCase): Comparison {
  const { inputs, weight } = makeInputs(c);
  const attrs = c.sample.attrs;
  const out0 = op.forward(inputs, attrs);
  const w = weight([...out0.shape]);
  const got = tapeGrads(op, inputs, attrs, w);
  if (op.oracle === "surrogate") {
    const want: Record<string, ArrayLike<number>> = {};
    op.surrogateVjp!(inputs, w.data, attrs).forEach((d, i) => { if (d !== null) want[`x${i}`] = d; });
    return compareTensors(got, want, { rtol: 0, atol: 0 }, 1e-6);
  }
  const loss = () => {
    const y = op.forward(inputs, attrs);
    let s = 0;
    for (let i = 0; i < y.size; i++) s += y.data[i]! * w.data[i]!;
    return s;
  };
  const want: Record<string, Float64Array> = {};
  const constant = new Set(c.sample.constant ?? []);
  for (const i of constant) {
    const at = got[`x${i}`]!.findIndex((v) => v !== 0);
    if (at >= 0) return { ok: false, vacuous: false, worst: { abs: Math.abs(got[`x${i}`]![at]!), rel: Infinity, tensor: `x${i}`, index: at }, message: `x${i}[${at}]: got ${got[`x${i}`]![at]}, expected exactly 0 (the output does not depend on x${i} here)` };
  }
  inputs.forEach((x, i) => { if (!constant.has(i)) want[`x${i}`] = fdGradient(loss, x); });
  const fdCmp = compareTensors(Object.fromEntries(Object.entries(got).filter(([n]) => n in want)), want, TOL_FD);
  if (!fdCmp.ok || op.symbolic === undefined) return fdCmp;
  // Symbolic oracle for elementwise ops: dL/dx_i = w_i f'(x_i), f' from mathjs.
  const df = symbolicDerivative(op.symbolic);
  const sym = new Float64Array(inputs[0]!.size);
  for (let i = 0; i < sym.length; i++) {
    sym[i] = w.data[i]! * (df.evaluate({ ...(attrs as object), x: inputs[0]!.data[i]! }) as number);
  }
  const symCmp = compareTensors({ x0: got.x0! }, { x0: sym }, TOL_SYMBOLIC);
  if (!symCmp.ok || symCmp.vacuous) return { ...symCmp, message: `symbolic oracle: ${symCmp.message}` };
  return fdCmp;
}

export function c0OpChecks(): CheckDef<OpCase>[] {
  return allOps().map((op) => ({
    kind: "property",
    id: `C0/op/${op.name}`,
    class: "C0" as const,
    subject: { op: op.name, dtype: "f64" },
    spec: "docs/spec/conformance.md#c0; docs/spec/tape.md#ops",
    tolerance: op.oracle === "surrogate"
      ? { kind: "surrogate-exact", rtol: 0, atol: 0 }
      : { kind: "finite-differences", ...TOL_FD, ...FD_METHOD, ...(op.symbolic ? { symbolic: TOL_SYMBOLIC } : {}) },
    runs: RUNS,
    arb: opCaseArb(op),
    run: (c: OpCase) => {
      const r = runOpCase(op, c);
      return { ok: r.ok, vacuous: r.vacuous, worst: r.worst, message: r.message };
    },
  }));
}
