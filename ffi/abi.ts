/**
 * The kernel ABI v2 (docs/spec/kernel-abi.md) as data and argument lists. The per-rule table lives
 * in ffi/abi.gen.ts, generated from the rule declarations by ffi/generate.ts; this module says how
 * a table row becomes a C signature. The generator (header prototypes, C++ wrappers) and the bun:ffi
 * loader (ffi/lib-call.ts) both build their argument lists with `signature`, so they cannot disagree.
 */
import { ABI_VERSION, RULE_ABIS } from "./abi.gen.ts";

export { ABI_VERSION };

export type InnerInputName = "k" | "v" | "q" | "x" | "p" | "a" | "b" | "alpha" | "theta" | "eta" | "omega";
export type GradName = `d${InnerInputName}`;

export interface HyperArg {
  readonly name: string;
  readonly kind: "i32" | "f64";
  /** An enum hyperparameter is passed as the index of its value in this list. */
  readonly values?: readonly string[];
  readonly min?: number;
  readonly max?: number;
  readonly boundByD?: "at-most" | "divides";
}

export interface RuleAbi {
  readonly rule: string;
  /** Has a state, hence an initial/final state, a checkpoint interval C and state gradients. */
  readonly recurrent: boolean;
  readonly hyper: readonly HyperArg[];
  readonly inputs: readonly InnerInputName[];
  readonly grads: readonly GradName[];
  readonly state: readonly string[];
  readonly frozen: boolean;
  /** The gates that are per key channel, [B,T,H,d] (KDA's alpha); absent = none (docs/spec/kernel-abi.md#inputs). */
  readonly channelGates?: readonly InnerInputName[];
  /**
   * Inputs with several rows per token (the declaration's tokenRows: Gated DeltaProduct's k, v and
   * theta, n_h rows), [B, T, H, n·d] or [B, T, H, n] for a token gate, n the hyperparameter `hyper`;
   * absent = one row of every input (docs/spec/kernel-abi.md#token-rows).
   */
  readonly tokenRows?: { readonly hyper: string; readonly inputs: readonly InnerInputName[] };
}

export const ABI: readonly RuleAbi[] = RULE_ABIS as unknown as readonly RuleAbi[];

export function abiOf(rule: string): RuleAbi | undefined {
  return ABI.find((a) => a.rule === rule);
}

export type KernelFn = "workspace_bytes" | "forward" | "backward" | "frozen_workspace_bytes" | "frozen_forward" | "frozen_backward";

export const PAIR_FNS: readonly KernelFn[] = ["workspace_bytes", "forward", "backward"];
export const FROZEN_FNS: readonly KernelFn[] = ["frozen_workspace_bytes", "frozen_forward", "frozen_backward"];

export function symbolName(rule: string, fn: KernelFn): string {
  return `nlk_${rule}_${fn}`;
}

/**
 * One C parameter. `in`: const float* that must not be NULL; `in?`: const float* that may be NULL
 * (= zero); `out`: float* written by the call; `ws`: the workspace (void*); `size`: size_t* result.
 */
export interface Param {
  readonly name: string;
  readonly kind: "i32" | "f64" | "in" | "in?" | "out" | "ws" | "size";
  /** For hyperparameters: their table row. */
  readonly hyper?: HyperArg;
}

export const isGate = (n: string): boolean => n === "alpha" || n === "theta" || n === "eta";

/**
 * Whether rule a's per-token tensor `name` holds one value per token: a gate or a gate's gradient
 * (dalpha, ...) that is not one of the rule's channel gates.
 */
export function isTokenGate(a: Pick<RuleAbi, "channelGates">, name: string): boolean {
  const gate = isGate(name) ? name : name.startsWith("d") && isGate(name.slice(1)) ? name.slice(1) : null;
  return gate !== null && !(a.channelGates ?? []).includes(gate as InnerInputName);
}

/** The C name of a hyperparameter: its own, unless a tensor argument has that name (Moneta's q). */
export function hyperParamName(a: RuleAbi, h: HyperArg): string {
  return a.inputs.includes(h.name as InnerInputName) || a.state.includes(h.name) ? `${h.name}_hyper` : h.name;
}

/** Every parameter of one function, in order. */
export function signature(a: RuleAbi, fn: KernelFn): Param[] {
  const frozenFn = fn.startsWith("frozen");
  const shape: Param[] = ["B", "T", "H", "d"].map((name) => ({ name, kind: "i32" }));
  if (a.recurrent && !frozenFn) shape.push({ name: "C", kind: "i32" });
  const hyper: Param[] = a.hyper.map((h) => ({ name: hyperParamName(a, h), kind: h.kind, hyper: h }));
  const p = (kind: Param["kind"]) => (name: string): Param => ({ name, kind });
  const head = [...shape, ...hyper];
  switch (fn) {
    case "workspace_bytes":
    case "frozen_workspace_bytes":
      return [...head, { name: "bytes", kind: "size" }];
    case "forward":
      return [...head, ...a.inputs.map(p("in")), ...a.state.map((s) => `${s}_0`).map(p("in")),
        p("out")("y"), ...a.state.map(p("out")), p("ws")("workspace")];
    case "backward":
      return [...head, ...a.inputs.map(p("in")), ...a.state.map((s) => `${s}_0`).map(p("in")),
        p("in?")("dy"), ...a.state.map((s) => `d${s}`).map(p("in?")), p("ws")("workspace"),
        ...a.grads.map(p("out")), ...a.state.map((s) => `d${s}_0`).map(p("out"))];
    case "frozen_forward":
      return [...head, p("in")("q"), ...a.state.map(p("in")), p("out")("y"), p("ws")("workspace")];
    case "frozen_backward":
      return [...head, p("in")("q"), ...a.state.map(p("in")), p("in?")("dy"), p("ws")("workspace"),
        p("out")("dq"), ...a.state.map((s) => `d${s}`).map(p("out"))];
  }
}

/** The functions of a rule (the frozen read's only where the rule has one). */
export function functionsOf(a: RuleAbi): KernelFn[] {
  return a.frozen ? [...PAIR_FNS, ...FROZEN_FNS] : [...PAIR_FNS];
}

export function gradInput(g: GradName): InnerInputName {
  return g.slice(1) as InnerInputName;
}

/**
 * The optional chunk-form query of a recurrent pair (docs/spec/kernel-abi.md#chunk-form):
 * `int nlk_<rule>_chunk_form(int* kind, int* C)`; a library that does not export it is sequential.
 */
export function chunkFormSymbol(rule: string): string {
  return `nlk_${rule}_chunk_form`;
}

/**
 * The optional variant functions of a pair (docs/spec/kernel-abi.md#variants):
 * `int nlk_<rule>_variants(int index, char* name, int cap)` (the count; the name of variant index)
 * and `int nlk_<rule>_set_variant(int index)` (pins a variant; -1: the library's own choice).
 */
export function variantSymbols(rule: string): { readonly list: string; readonly set: string } {
  return { list: `nlk_${rule}_variants`, set: `nlk_${rule}_set_variant` };
}

/** The chunk-form codes of nlk.h (NLK_CHUNK_*). */
export const CHUNK_FORM_CODES: Readonly<Record<number, "sequential" | "exact-chunked" | "chunk-start-gd">> = {
  0: "sequential", 1: "exact-chunked", 2: "chunk-start-gd",
};

/** dtype codes of nlk_dtypes (nlk.h). */
export const DTYPE_CODES: Readonly<Record<number, string>> = { 1: "f32", 2: "bf16", 3: "f16", 4: "f64" };

/** The ABI shape of one call: B batches, T tokens, H heads, d per head. */
export interface Shape {
  readonly B: number;
  readonly T: number;
  readonly H: number;
  readonly d: number;
}

/**
 * Rows per token of rule a's per-token input or gradient `name` (d<name> has its input's): the value
 * of the hyperparameter that counts them for an input in tokenRows, else 1. `hyper` holds the call's
 * hyperparameters; without it a rule with tokenRows is an error naming the hyperparameter, so a
 * caller that does not pass it cannot size such a rule's tensors as one row per token.
 */
export function rowsPerToken(a: Pick<RuleAbi, "tokenRows" | "rule">, name: string, hyper?: Readonly<Record<string, number | string>>): number {
  const tr = a.tokenRows;
  if (tr === undefined) return 1;
  const input = name.length > 1 && name.startsWith("d") && (tr.inputs as readonly string[]).includes(name.slice(1)) ? name.slice(1) : name;
  if (!(tr.inputs as readonly string[]).includes(input)) return 1;
  const n = hyper?.[tr.hyper];
  if (typeof n !== "number" || !Number.isInteger(n) || n < 1) {
    throw new Error(`rule '${a.rule}': ${name} has ${tr.hyper} rows per token; the call's hyperparameter ${tr.hyper} is ${n === undefined ? "not given" : String(n)}`);
  }
  return n;
}

/**
 * Elements of rule a's per-token input or gradient ([B,T,H] for token gates, [B,T,H,d] otherwise;
 * times the rows per token of an input in tokenRows, which needs the call's `hyper`).
 */
export function tokenElems(a: Pick<RuleAbi, "channelGates"> & Partial<Pick<RuleAbi, "tokenRows" | "rule">>, name: string, s: Shape,
  hyper?: Readonly<Record<string, number | string>>): number {
  const rows = a.tokenRows === undefined ? 1 : rowsPerToken({ rule: a.rule ?? "?", tokenRows: a.tokenRows }, name, hyper);
  return s.B * s.T * s.H * rows * (isTokenGate(a, name) ? 1 : s.d);
}
