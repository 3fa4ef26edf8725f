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
import { roundTo, type StorageDType } from "../../../src/precision.ts";
import { Rng } from "../../../src/rng.ts";
import { Tensor } from "../../../src/tensor.ts";

/** What kernel_load reports of the declaration (python/nlc_torch/kernel_declaration.py Kernel.conventions). */
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
  readonly accumulate: "f32" | "f64" | "tf32" | null;
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
  /** The kernel's names of its outputs (messages only): `y` and each final state by our state name (`outputs`). Absent from older hosts. */
  readonly outputs?: Readonly<Record<string, string>>;
  /**
   * Gates the kernel parametrises itself (docs/spec/py-backend.md#gate-forms): it receives a raw value
   * and computes the gate inside. Absent from older hosts.
   */
  readonly gate_forms?: Readonly<Partial<Record<"alpha" | "theta", GateForm>>>;
  /** Keywords passed unchanged to every call (docs/spec/py-backend.md#constants). Absent from older hosts. */
  readonly constants?: Readonly<Record<string, boolean | number | string>>;
  /** Storage dtype per input where it differs from `dtype` (docs/spec/py-backend.md#input-dtypes). Absent from older hosts. */
  readonly input_dtypes?: Readonly<Record<string, StorageDType>>;
  /**
   * "pow2": the kernel takes head dimensions d that are powers of two only; the generated d is
   * rounded down to one (docs/spec/py-backend.md#head-dims). Absent from older hosts.
   */
  readonly head_dims?: "pow2" | null;
  /**
   * Gates the kernel takes once per head, [H] or [H, d] (docs/spec/py-backend.md#per-head): generated
   * equal over the tokens and sequences of a head, their gradient not compared. Absent from older hosts.
   */
  readonly per_head?: readonly string[];
}

/** The head dimension a generated d becomes under the kernel's declared `head_dims`. */
export function declaredHeadDim(conv: Conventions, d: number): number {
  return conv.head_dims === "pow2" ? 2 ** Math.floor(Math.log2(Math.max(1, d))) : d;
}

/**
 * A gate the kernel computes from a raw input (docs/spec/py-backend.md#gate-forms), with the exact
 * map to our gate (all in f64):
 *
 *   softplus  α = 1 − exp(g),  g = −exp(A_log[h]) · softplus(raw + dt_bias[h, i])   (fla's use_gate_in_kernel)
 *   sigmoid   θ = sigmoid(raw)                                                       (use_beta_sigmoid_in_kernel)
 *   sigmoid2  θ = 2 · sigmoid(raw), in (0, 2)                                        (… with allow_neg_eigval)
 *
 * A_log [H] and dt_bias [H·d] are the kernel's per-head parameters, held at the values of
 * `gateParams` (exact in every storage dtype); their gradients are not compared.
 */
export type GateForm =
  | { readonly form: "softplus"; readonly A_log: string; readonly dt_bias: string | null }
  | { readonly form: "sigmoid" | "sigmoid2" };

/**
 * A softplus gate's per-head parameters (python/nlc_torch/kernel_calls.py gate_params makes the same values):
 * A_log[h] = (h mod 4)/4 − 1/4, dt_bias[h, i] = ((h + i) mod 5 − 2)/8; multiples of 1/8, exact in bf16.
 */
export function gateParams(h: number, i: number): { A_log: number; dt_bias: number } {
  return { A_log: (h % 4) / 4 - 0.25, dt_bias: (((h + i) % 5) - 2) / 8 };
}

const softplus = (z: number): number => (z > 30 ? z : Math.log1p(Math.exp(z)));
const sigmoid = (z: number): number => (z >= 0 ? 1 / (1 + Math.exp(-z)) : Math.exp(z) / (1 + Math.exp(z)));
/** The inverse of softplus, for s > 0: log(exp(s) − 1). */
const softplusInv = (s: number): number => (s > 30 ? s : Math.log(Math.expm1(s)));

/** The gate's form in `conv`, if `name` is a gate the kernel parametrises. */
function formOf(conv: Conventions, name: string): GateForm | undefined {
  return conv.gate_forms?.[name as "alpha" | "theta"];
}

/** The width of a per-channel gate row (1 for a gate per token), from the tensor's last dimension. */
function rowWidth(t: { shape: readonly number[] }, perChannel: boolean): number {
  return perChannel ? t.shape[t.shape.length - 1]! : 1;
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
export function kernelValue(conv: Conventions, name: string, gen: Tensor, rng: Rng, h = 0): Tensor {
  const out = new Tensor("f64", [...gen.shape]);
  const a = gen.data, o = out.data;
  if (conv.absent.includes(name)) {
    out.data.fill(NEUTRAL[name]!);
    return out;
  }
  for (let i = 0; i < a.length; i++) o[i] = a[i]!;
  const form = formOf(conv, name);
  // a gate the kernel takes through a sigmoid is drawn inside (0, 1), as a bounded one
  if (conv.bounded.includes(name) || (form !== undefined && form.form !== "softplus")) for (let i = 0; i < o.length; i++) o[i] = o[i]! / (1 + o[i]!);
  if (name in conv.log_gates) for (let i = 0; i < o.length; i++) o[i] = Math.log1p(-o[i]!);
  if (form?.form === "softplus") {
    // α in (0, 1) -> −log(1 − α) = exp(A) softplus(z) -> z = softplus⁻¹(−log(1 − α)/exp(A)) -> raw = z − dt_bias
    const w = rowWidth(gen, gen.shape.length > 1);
    for (let i = 0; i < o.length; i++) {
      const { A_log, dt_bias } = gateParams(h, i % w);
      o[i] = softplusInv(-Math.log1p(-o[i]!) / Math.exp(A_log)) - (form.dt_bias === null ? 0 : dt_bias);
    }
  } else if (form !== undefined) {
    // θ in (0, 1) -> raw = logit(θ); the kernel's θ is sigmoid(raw), or 2 sigmoid(raw) in (0, 2) for sigmoid2
    for (let i = 0; i < o.length; i++) o[i] = Math.log(o[i]!) - Math.log1p(-o[i]!);
  }
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
export function referenceValue(conv: Conventions, name: string, kin: Tensor, d: number, h = 0): Tensor {
  const out = new Tensor("f64", [...kin.shape]);
  let v: ArrayLike<number> = kin.data;
  if (conv.qk_l2norm && (name === "q" || name === "k")) v = l2Rows(v, d);
  if (name in conv.log_gates) v = Float64Array.from(v, (g) => -Math.expm1(g));
  const form = formOf(conv, name);
  if (form?.form === "softplus") {
    const w = rowWidth(kin, kin.shape.length > 1);
    v = Float64Array.from(v, (raw, i) => {
      const { A_log, dt_bias } = gateParams(h, i % w);
      return -Math.expm1(-Math.exp(A_log) * softplus(raw + (form.dt_bias === null ? 0 : dt_bias)));
    });
  } else if (form !== undefined) {
    const c = form.form === "sigmoid2" ? 2 : 1;
    v = Float64Array.from(v, (raw) => c * sigmoid(raw));
  }
  const s = name === "q" ? referenceScale(conv, d) : 1;
  for (let i = 0; i < out.size; i++) out.data[i] = v[i]! * s;
  return out;
}

/**
 * The gradient w.r.t. the kernel's input `name` from the reference's gradient (f64): the transpose of
 * referenceValue's Jacobian. `kin`: the kernel's value of that input. `stored`: the normalised q, k
 * read back in that dtype by the normalisation's backward (the storage-intermediates yardstick).
 */
export function kernelGradient(conv: Conventions, name: string, kin: ArrayLike<number>, g: ArrayLike<number>, d: number, stored?: StorageDType,
  h = 0, width = 1): Float64Array {
  const s = name === "q" ? referenceScale(conv, d) : 1;
  let out: Float64Array = Float64Array.from(g, (x) => x * s);
  if (name in conv.log_gates) out = out.map((x, i) => -Math.exp(kin[i]!) * x);
  const form = formOf(conv, name);
  if (form?.form === "softplus") {
    // dα/draw = exp(g) · exp(A) · sigmoid(z),  g = −exp(A) softplus(z),  z = raw + dt_bias
    out = out.map((x, i) => {
      const { A_log, dt_bias } = gateParams(h, i % width);
      const z = kin[i]! + (form.dt_bias === null ? 0 : dt_bias), eA = Math.exp(A_log);
      return Math.exp(-eA * softplus(z)) * eA * sigmoid(z) * x;
    });
  } else if (form !== undefined) {
    const c = form.form === "sigmoid2" ? 2 : 1;
    out = out.map((x, i) => { const sg = sigmoid(kin[i]!); return c * sg * (1 - sg) * x; });
  }
  if (conv.qk_l2norm && (name === "q" || name === "k")) out = l2RowsVjp(kin, out, d, stored);
  return out;
}
