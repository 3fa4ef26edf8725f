/**
 * The conventions a py: kernel declares (docs/spec/py-backend.md#conventions), as one typed record,
 * and the two maps they define between the kernel's inputs and the reference's, both in f64:
 *
 *   reference input  = f(kernel input)      q_ref = scale · q̂,  k_ref = k̂  (x̂ = x/‖x‖ if qk_l2norm, else x),
 *                                           α_ref = 1 − exp(g) for a gate in log space
 *   kernel gradient  = J_fᵀ · reference gradient
 *
 * The kernel receives its inputs rounded once to its storage dtype; f is applied to those rounded
 * values in f64, so no rounding of the scaled, normalised or exponentiated value is ever counted as
 * the kernel's error. Absent inputs take their neutral value and are neither sent nor compared.
 */
import { roundTo, type StorageDType } from "../../src/precision.ts";
import { Rng } from "../../src/rng.ts";
import { Tensor } from "../../src/tensor.ts";

/** What kernel_load reports of the declaration (python/nlc_torch/kernel_host.py Kernel.conventions). */
export interface Conventions {
  /** Inputs the kernel does not take: generated at their neutral value, not sent, not compared. */
  readonly absent: readonly string[];
  /** The query scale the kernel applies (value d_k^-1/2 or a number); null: none. `divided`: the old fixed-factor form, undone by the host. */
  readonly scale: { readonly value: "rsqrt_dk" | number; readonly keyword: string | null; readonly divided?: number } | null;
  /** Gates the kernel takes in log space: our gate -> the kernel's keyword; the kernel's value is log(1 − gate). */
  readonly log_gates: Readonly<Record<string, string>>;
  /** Gates generated strictly inside (0, 1) (a bounded step size θ). */
  readonly bounded: readonly string[];
  /** The kernel L2-normalises q and k itself: it receives them raw. */
  readonly qk_l2norm: boolean;
  /** Declared accumulate dtype (null: as the storage dtype implies, docs/spec/py-backend.md#precision). */
  readonly accumulate: "f32" | "f64" | null;
  /**
   * "storage": the kernel keeps its intermediates in its storage dtype, and its plain reference
   * does too (docs/spec/precision.md#intermediates); null: f32 intermediates. Absent from older hosts.
   */
  readonly intermediates?: "storage" | null;
  /** The kernel's own names (messages only): our input -> its keyword (`names`, `log_gates`). Absent from older hosts. */
  readonly keywords?: Readonly<Record<string, string>>;
  /** The keyword the kernel takes the initial state under (`initial_state`), and whether states travel as a dict. */
  readonly initial_state?: string;
  readonly state_dict?: boolean;
}

export const NO_CONVENTIONS: Conventions = { absent: [], scale: null, log_gates: {}, bounded: [], qk_l2norm: false, accumulate: null };

/**
 * The neutral value of each input that may be absent (docs/spec/py-backend.md#absent): the value at
 * which the rule does what a kernel without that input does. α = 0: nothing is forgotten (Delta at
 * α = 0 is DeltaNet); η = 0: no momentum is carried (Titans' S is the current surprise alone).
 */
export const NEUTRAL: Readonly<Record<string, number>> = { alpha: 0, eta: 0 };

/** The absent inputs of a rule that reads `inputs`; an absent input without a neutral value is an error naming it. */
export function absentInputs(conv: Conventions, inputs: readonly string[], who: string): string[] {
  for (const n of conv.absent) {
    if (!(n in NEUTRAL)) {
      throw new Error(`${who}: nlc['absent'] lists ${n}, which has no neutral value; inputs that may be absent: ` +
        `${Object.entries(NEUTRAL).map(([k, v]) => `${k} (= ${v})`).join(", ")} (docs/spec/py-backend.md#absent)`);
    }
  }
  return conv.absent.filter((n) => inputs.includes(n));
}

/** The factor the reference's q carries: the kernel's own query scale (1 when none, or undone by the host). */
export function referenceScale(conv: Conventions, d: number): number {
  if (conv.scale === null) return 1;
  return conv.scale.value === "rsqrt_dk" ? 1 / Math.sqrt(d) : conv.scale.value;
}

/**
 * The generated value (f64, before rounding) that the kernel receives for input `name`: the neutral
 * value if absent, θ/(1 + θ) for a bounded gate, log(1 − gate) for a gate in log space, and q, k
 * scaled per token by a random factor in [0.5, 2] when the kernel normalises them (raw vectors).
 */
export function kernelValue(conv: Conventions, name: string, gen: Tensor, rng: Rng): Tensor {
  const out = new Tensor("f64", [...gen.shape]);
  const a = gen.data, o = out.data;
  if (conv.absent.includes(name)) {
    out.data.fill(NEUTRAL[name]!);
    return out;
  }
  for (let i = 0; i < a.length; i++) o[i] = a[i]!;
  if (conv.bounded.includes(name)) for (let i = 0; i < o.length; i++) o[i] = o[i]! / (1 + o[i]!);
  if (name in conv.log_gates) for (let i = 0; i < o.length; i++) o[i] = Math.log1p(-o[i]!);
  if (conv.qk_l2norm && (name === "q" || name === "k")) {
    const d = gen.shape[gen.shape.length - 1]!;
    for (let t = 0; t < o.length / d; t++) {
      const c = rng.uniform(0.5, 2);
      for (let i = 0; i < d; i++) o[t * d + i]! *= c;
    }
  }
  return out;
}

function l2Rows(x: ArrayLike<number>, d: number): Float64Array {
  const out = new Float64Array(x.length);
  for (let t = 0; t < x.length / d; t++) {
    let n = 0;
    for (let i = 0; i < d; i++) n += x[t * d + i]! ** 2;
    const r = n > 0 ? 1 / Math.sqrt(n) : 0;
    for (let i = 0; i < d; i++) out[t * d + i] = x[t * d + i]! * r;
  }
  return out;
}

/**
 * The VJP of x ↦ x/‖x‖ per row: (g − x̂ (x̂·g)) / ‖x‖ (as the level's L2 backward, src/rules/level-projection.ts).
 * `stored`: x̂ as a kernel that keeps it in that dtype reads it back in its backward (rounded to
 * nearest), for the storage-intermediates yardstick (docs/spec/precision.md#intermediates).
 */
function l2RowsVjp(x: ArrayLike<number>, g: ArrayLike<number>, d: number, stored?: StorageDType): Float64Array {
  const out = new Float64Array(x.length), hat = new Float64Array(d);
  for (let t = 0; t < x.length / d; t++) {
    let n = 0, dot = 0;
    for (let i = 0; i < d; i++) n += x[t * d + i]! ** 2;
    const norm = Math.sqrt(n);
    if (norm === 0) continue;
    for (let i = 0; i < d; i++) hat[i] = stored === undefined ? x[t * d + i]! / norm : roundTo(stored, x[t * d + i]! / norm);
    for (let i = 0; i < d; i++) dot += hat[i]! * g[t * d + i]!;
    for (let i = 0; i < d; i++) out[t * d + i] = (g[t * d + i]! - hat[i]! * dot) / norm;
  }
  return out;
}

/** The reference's value of input `name` from the kernel's (rounded) value, in f64. */
export function referenceValue(conv: Conventions, name: string, kin: Tensor, d: number): Tensor {
  const out = new Tensor("f64", [...kin.shape]);
  let v: ArrayLike<number> = kin.data;
  if (conv.qk_l2norm && (name === "q" || name === "k")) v = l2Rows(v, d);
  if (name in conv.log_gates) v = Float64Array.from(v, (g) => -Math.expm1(g));
  const s = name === "q" ? referenceScale(conv, d) : 1;
  for (let i = 0; i < out.size; i++) out.data[i] = v[i]! * s;
  return out;
}

/**
 * The gradient w.r.t. the kernel's input `name` from the reference's gradient (f64): the transpose of
 * referenceValue's Jacobian. `kin`: the kernel's value of that input. `stored`: the normalised q, k
 * read back in that dtype by the normalisation's backward (the storage-intermediates yardstick).
 */
export function kernelGradient(conv: Conventions, name: string, kin: ArrayLike<number>, g: ArrayLike<number>, d: number, stored?: StorageDType): Float64Array {
  const s = name === "q" ? referenceScale(conv, d) : 1;
  let out: Float64Array = Float64Array.from(g, (x) => x * s);
  if (name in conv.log_gates) out = out.map((x, i) => -Math.exp(kin[i]!) * x);
  if (conv.qk_l2norm && (name === "q" || name === "k")) out = l2RowsVjp(kin, out, d, stored);
  return out;
}
