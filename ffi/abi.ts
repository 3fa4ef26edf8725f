/**
 * The kernel ABI of ffi/nlk.h as data: for each rule, the hyperparameters, the inner inputs, the
 * state, the saved tensors and the gradients, each in the order of the C prototypes. Everything
 * that calls a kernel library (the ffi wrappers, the C5 checks, the benchmark) is derived from
 * this table; the C5 check `C5/abi/header-matches-table` keeps it and nlk.h in step.
 */
import type { RuleKey } from "../src/rules/index.ts";
import type { RuleConfig } from "../src/rules/types.ts";

export const ABI_VERSION = 1;

export type HyperKind = "i32" | "f64";

export interface HyperArg {
  readonly name: string;
  readonly kind: HyperKind;
  value(cfg: RuleConfig): number;
}

/** A per-sequence tensor; the ABI passes it batched as [B, ...shape]. */
export interface TensorArg {
  readonly name: string;
  shape(cfg: RuleConfig): number[];
}

export type InnerInputName = "k" | "v" | "q" | "x" | "alpha" | "theta" | "eta" | "omega";
export type GradName = `d${InnerInputName}`;

export interface RuleAbi {
  readonly rule: RuleKey;
  readonly hyper: readonly HyperArg[];
  /** Inner inputs in ABI order; the backward takes the same list. */
  readonly inputs: readonly InnerInputName[];
  /** State tensors (forward: initial state in, final state out), named as the rule's state. */
  readonly state: readonly string[];
  /** Saved by the forward for the backward; the names are the reference pair's `saved`. */
  readonly saved: readonly TensorArg[];
  readonly grads: readonly GradName[];
  readonly frozen: { readonly state: readonly string[]; readonly saved: readonly TensorArg[] } | null;
}

const num = (cfg: RuleConfig, n: string) => Number(cfg[n]);
const i32 = (name: string): HyperArg => ({ name, kind: "i32", value: (c) => num(c, name) });
const f64 = (name: string): HyperArg => ({ name, kind: "f64", value: (c) => num(c, name) });
const T = (name: string, shape: (c: RuleConfig) => number[]): TensorArg => ({ name, shape });

const sd = (c: RuleConfig) => [c.seq_len, c.d];
const states = (name: string, rows: (c: RuleConfig) => number, cols: (c: RuleConfig) => number) =>
  T(name, (c) => [c.seq_len + 1, rows(c), cols(c)]);
const d = (c: RuleConfig) => c.d;
const dh = (c: RuleConfig) => num(c, "d_hidden");
const m = (c: RuleConfig) => num(c, "m_slots");
const dk = (c: RuleConfig) => num(c, "d_compress");
const perToken = (name: string, width: (c: RuleConfig) => number) => T(name, (c) => [c.seq_len, width(c)]);

const LATTICE_VARIANTS = ["decode", "encode", "similarity"];

const mlpSaved = [states("w1States", dh, d), states("w2States", d, dh)];

export const ABI: readonly RuleAbi[] = [
  {
    rule: "delta", hyper: [], inputs: ["k", "v", "q", "alpha", "theta"], state: ["M"],
    saved: [states("mStates", d, d), T("e", sd)], grads: ["dk", "dv", "dq", "dalpha", "dtheta"],
    frozen: { state: ["M"], saved: [] },
  },
  {
    rule: "titans", hyper: [], inputs: ["k", "v", "q", "alpha", "theta", "eta"], state: ["M", "S"],
    saved: [states("mStates", d, d), states("sStates", d, d), T("e", sd)],
    grads: ["dk", "dv", "dq", "dalpha", "dtheta", "deta"],
    frozen: { state: ["M", "S"], saved: [] },
  },
  {
    rule: "hebbian", hyper: [], inputs: ["k", "v", "q", "alpha"], state: ["M"],
    saved: [states("mStates", d, d)], grads: ["dk", "dv", "dq", "dalpha"],
    frozen: { state: ["M"], saved: [] },
  },
  {
    rule: "atlas", hyper: [], inputs: ["k", "v", "q", "alpha", "theta", "eta", "omega"], state: ["M", "S"],
    saved: [states("mStates", d, d), states("sStates", d, d)],
    grads: ["dk", "dq", "dalpha", "dtheta", "deta", "domega"],
    frozen: { state: ["M", "S"], saved: [] },
  },
  {
    rule: "moneta",
    hyper: [i32("d_hidden"), f64("p"), f64("q"), f64("lambda_2"), f64("sign_sharpness")],
    inputs: ["k", "v", "q", "alpha", "theta"], state: ["W1", "W2"],
    saved: [...mlpSaved, states("a1States", dh, d), states("a2States", d, dh)],
    grads: ["dk", "dv", "dq", "dalpha", "dtheta"],
    frozen: { state: ["W1", "W2"], saved: [] },
  },
  {
    rule: "yaad", hyper: [i32("d_hidden"), f64("delta"), f64("lambda_local"), f64("lambda_2")],
    inputs: ["k", "v", "q", "alpha", "theta"], state: ["W1", "W2"], saved: mlpSaved,
    grads: ["dk", "dv", "dq", "dalpha", "dtheta"],
    frozen: { state: ["W1", "W2"], saved: [] },
  },
  {
    rule: "memora", hyper: [i32("d_hidden")],
    inputs: ["k", "v", "q", "alpha", "theta"], state: ["W1", "W2"], saved: mlpSaved,
    grads: ["dk", "dv", "dq", "dalpha", "dtheta"],
    frozen: { state: ["W1", "W2"], saved: [] },
  },
  {
    rule: "lattice",
    hyper: [i32("m_slots"), { name: "variant", kind: "i32", value: (c) => LATTICE_VARIANTS.indexOf(String(c.variant)) }],
    inputs: ["k", "v", "q", "alpha"], state: ["S"],
    saved: [states("sStates", m, d), perToken("readW", m), perToken("gamma", m), perToken("pDot", m), perToken("uNorm", m)],
    grads: ["dk", "dv", "dq", "dalpha"],
    frozen: { state: ["S"], saved: [perToken("readW", m)] },
  },
  {
    rule: "trellis", hyper: [i32("d_compress"), f64("lambda_k"), f64("lambda_v")],
    inputs: ["k", "v", "q", "x", "alpha", "theta"], state: ["S_K", "S_V"],
    saved: [
      states("skStates", dk, d), states("svStates", d, dk),
      perToken("r", dk), perToken("cHat", dk), perToken("eK", dk), perToken("u", dk), perToken("c", dk), T("eV", sd),
    ],
    grads: ["dk", "dv", "dq", "dx", "dalpha", "dtheta"],
    frozen: { state: ["S_K", "S_V"], saved: [perToken("r", dk)] },
  },
  {
    rule: "swa", hyper: [i32("heads"), i32("window")], inputs: ["k", "v", "q"], state: [],
    saved: [T("attnP", (c) => [num(c, "heads"), c.seq_len, num(c, "window")])], grads: ["dk", "dv", "dq"],
    frozen: null,
  },
];

export function abiOf(rule: string): RuleAbi | undefined {
  return ABI.find((a) => a.rule === rule);
}

/** Per-sequence shape of an inner input. */
export function inputShape(name: InnerInputName, cfg: RuleConfig): number[] {
  return name === "alpha" || name === "theta" || name === "eta" ? [cfg.seq_len] : [cfg.seq_len, cfg.d];
}

export function gradInput(g: GradName): InnerInputName {
  return g.slice(1) as InnerInputName;
}

export type KernelFn = "forward" | "backward" | "frozen_forward" | "frozen_backward";

export function symbolName(rule: string, fn: KernelFn): string {
  return `nlk_${rule}_${fn}`;
}

/** Pointer-argument names of one C function, in order (inputs then outputs). */
export function pointerArgs(a: RuleAbi, fn: KernelFn): { inputs: string[]; outputs: string[] } {
  const saved = a.saved.map((t) => t.name);
  switch (fn) {
    case "forward":
      return { inputs: [...a.inputs, ...a.state.map((n) => `${n}_0`)], outputs: ["y", ...a.state, ...saved] };
    case "backward":
      return { inputs: [...a.inputs, ...saved, "dy"], outputs: [...a.grads] };
    case "frozen_forward":
      return { inputs: ["q", ...a.frozen!.state], outputs: ["y", ...a.frozen!.saved.map((t) => t.name)] };
    case "frozen_backward":
      return { inputs: ["q", ...a.frozen!.state, ...a.frozen!.saved.map((t) => t.name), "dy"], outputs: ["dq"] };
  }
}
