/**
 * Gradients vs finite differences of a scalar loss (docs/spec/conformance.md#c2): the full Jacobian when the
 * inputs are few, otherwise random directions v^T J u (v folded into the loss), and on a
 * directional failure the full check, whose per-element result is what a user needs.
 */
import { Rng } from "../src/rng.ts";
import type { Tensor } from "../src/tensor.ts";
import { compareTensors, TOL_FD, VACUITY_FACTOR, type Comparison, type Worst } from "./compare.ts";
import { fdDirectional, fdGradient } from "./fd.ts";

export interface Differentiated {
  readonly name: string;
  /** The input the loss reads; it is perturbed in place and restored. */
  readonly tensor: Tensor;
  /** The gradient under test. */
  readonly grad: ArrayLike<number>;
}

export interface GradCheckOptions {
  /** Up to this many input elements the full Jacobian is checked. */
  readonly fullMax: number;
  readonly directions: number;
  /** Seed of the random directions. */
  readonly seed: number;
  /** Per-tensor vacuity floor on the gradients (0: the caller judges vacuity). */
  readonly floor?: number;
}

function fullCheck(loss: () => number, ds: readonly Differentiated[], floor: number): Comparison {
  const got: Record<string, ArrayLike<number>> = {}, want: Record<string, Float64Array> = {};
  for (const d of ds) {
    got[d.name] = d.grad;
    want[d.name] = fdGradient(loss, d.tensor);
  }
  return compareTensors(got, want, TOL_FD, floor);
}

export function gradCheck(loss: () => number, ds: readonly Differentiated[], opts: GradCheckOptions): Comparison {
  const floor = opts.floor ?? VACUITY_FACTOR * TOL_FD.atol;
  const total = ds.reduce((s, d) => s + d.tensor.size, 0);
  if (total <= opts.fullMax) return fullCheck(loss, ds, floor);

  const rng = new Rng(opts.seed);
  let worst: Worst = { abs: 0, rel: 0, tensor: "direction", index: -1 };
  for (let k = 0; k < opts.directions; k++) {
    const us = ds.map((d) => Float64Array.from({ length: d.tensor.size }, () => rng.uniform(-1, 1)));
    let a = 0, scale = 0;
    ds.forEach((d, i) => {
      const u = us[i]!;
      for (let j = 0; j < u.length; j++) {
        a += d.grad[j]! * u[j]!;
        scale += Math.abs(d.grad[j]! * u[j]!);
      }
    });
    const fd = fdDirectional(loss, ds.map((d) => d.tensor), us);
    const abs = Math.abs(a - fd);
    // The bound scales with u: atol per element (in quadrature), rtol on the summed contributions.
    const bound = TOL_FD.atol * Math.sqrt(total) + TOL_FD.rtol * scale;
    const here: Worst = { abs, rel: abs / Math.max(Math.abs(fd), 1e-300), tensor: "direction", index: k };
    if (abs > worst.abs) worst = here;
    if (!(abs <= bound)) {
      const full = fullCheck(loss, ds, floor);
      const msg = `direction ${k}: v^T J u = ${fd}, tape ${a} (|diff| ${abs.toExponential(3)} > ${bound.toExponential(3)})`;
      // `worst` is the failing direction the message names, not an earlier larger (passing) one.
      return full.ok ? { ok: false, vacuous: false, worst: here, message: `${msg}; full Jacobian check passed` } : full;
    }
  }
  const flat: string[] = [];
  for (const d of ds) {
    let m = 0;
    for (let i = 0; i < d.grad.length; i++) m = Math.max(m, Math.abs(d.grad[i]!));
    if (m < floor) flat.push(`${d.name} (max |grad| ${m.toExponential(2)})`);
  }
  if (flat.length > 0) return { ok: false, vacuous: true, worst, message: `near-zero gradients: ${flat.join(", ")}` };
  return { ok: true, vacuous: false, worst };
}
