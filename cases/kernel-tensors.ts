/**
 * A kernel case's tensors by what they are (TensorKey: y, a final state, an input's gradient, the
 * initial state's gradient) instead of names in strings: the one typed per-sequence record
 * (oracle/kernel-case.ts SeqTensors) read, written and mapped by key; how the report and a py:
 * kernel's own names spell each tensor; and the judge's items of a case (oracle/kernel-judge.ts).
 */
import { abiOf, gradInput, type GradName, type RuleAbi } from "../ffi/abi.ts";
import { Tensor } from "../src/tensor.ts";
import { usedParams } from "../src/rules/level.ts";
import { stateNames } from "../src/rules/state-grad.ts";
import type { InnerGrads, RuleDecl } from "../src/rules/types.ts";
import type { Compared } from "../oracle/kernel-judge.ts";
import type { SeqTensors } from "../oracle/kernel-case.ts";

/** One tensor of a kernel case, by what it is. */
export type TensorKey =
  | { readonly part: "y" }
  /** The final state (active pairs). */
  | { readonly part: "state"; readonly name: string }
  /** The gradient of the per-token input `name` (k, v, q, alpha, ...). */
  | { readonly part: "grad"; readonly name: string }
  /** The gradient of the initial state (a frozen read: of the state it reads). */
  | { readonly part: "dState0"; readonly name: string };

export function emptySeq<A>(): SeqTensors<A> {
  return { state: {}, grads: {}, dState0: {} };
}

/**
 * How the report names a tensor. "abi" (C5 native, C6 kernel fixtures): as ffi/nlk.h's parameters,
 * y, M (the final state), dk, dM_0 (a frozen read: dM); "py" (the py: checks): the final state as
 * `state M` and the state's gradient as `dM (initial state)`.
 */
export type NameStyle = "abi" | "py";

/** How one naming spells each kind of tensor. */
export interface TensorNaming {
  readonly y: string;
  state(name: string): string;
  grad(input: string): string;
  dState0(name: string): string;
}

/** A tensor's name under a naming. */
export function nameOf(k: TensorKey, naming: TensorNaming): string {
  return k.part === "y" ? naming.y : naming[k.part](k.name);
}

/** The report's naming: y, the final state and its gradient by style (`M` or `state M`; frozen read: dM), dk. */
function reportNaming(frozen: boolean, style: NameStyle): TensorNaming {
  return {
    y: "y",
    state: (n) => (style === "abi" ? n : `state ${n}`),
    grad: (n) => `d${n}`,
    dState0: (n) => (style === "py" ? `d${n} (initial state)` : frozen ? `d${n}` : `d${n}_0`),
  };
}

/** What a py: kernel calls its tensors (conformance/kernel/python/conventions.ts Conventions). */
export interface KernelNames {
  /** Our input -> the kernel's keyword, where they differ. */
  readonly keywords: Readonly<Record<string, string>>;
  /** The kernel's initial-state keyword, and whether its states travel as a dict (else a single state is a bare tensor). */
  readonly initialState: string;
  readonly stateDict: boolean;
  /** The rule's state names. */
  readonly states: readonly string[];
  /** The kernel's names of its outputs, where declared: `y` (e.g. fla's `o`) and each final state by our state name (`final_state`). */
  readonly outputs?: Readonly<Record<string, string>>;
}

/**
 * A failure message's name of a tensor of a py: kernel: the kernel's own name first, the report's
 * in brackets where they differ (`dg [dalpha]`, `dbeta [dtheta]`, `dinitial_state [dM (initial state)]`,
 * `final state [state M]`; with declared output names `o [y]`, `final_state [state M]`).
 */
export function kernelLabel(k: TensorKey, ours: string, names: KernelNames): string {
  const stateKw = (n: string) => (names.stateDict || names.states.length > 1 ? `${names.initialState}.${n}` : names.initialState);
  const out = names.outputs ?? {};
  const theirs = k.part === "y" ? out.y ?? "y"
    : k.part === "state" ? out[k.name] ?? `final state${names.stateDict || names.states.length > 1 ? ` ${k.name}` : ""}`
    : k.part === "grad" ? `d${names.keywords[k.name] ?? k.name}`
    : `d${stateKw(k.name)}`;
  return theirs === ours ? ours : `${theirs} [${ours}]`;
}

/** The report's name of a tensor: built here and nowhere else. */
export function tensorName(k: TensorKey, frozen: boolean, style: NameStyle = "abi"): string {
  return nameOf(k, reportNaming(frozen, style));
}

/** The reference's gradients (InnerGrads: dk, dalpha, ..., dState0) as the record's grads and dState0; absent ones stay absent. */
export function fromInnerGrads(g: InnerGrads): Pick<SeqTensors, "grads" | "dState0"> {
  const { dState0, ...byGrad } = g;
  const grads: Record<string, ArrayLike<number>> = {}, d0: Record<string, ArrayLike<number>> = {};
  for (const [n, t] of Object.entries(byGrad)) if (t instanceof Tensor) grads[gradInput(n as GradName)] = t.data;
  for (const [n, t] of Object.entries(dState0 ?? {})) d0[n] = t.data;
  return { grads, dState0: d0 };
}

/** The gradients a kernel returns (frozen read: dq and the read state's), in the ABI's order. */
export function kernelGradKeys(abi: RuleAbi, frozen: boolean): { tokens: Extract<TensorKey, { part: "grad" }>[]; states: Extract<TensorKey, { part: "dState0" }>[] } {
  return {
    tokens: frozen ? [{ part: "grad", name: "q" }] : abi.grads.map((g) => ({ part: "grad", name: gradInput(g) })),
    states: abi.state.map((name) => ({ part: "dState0", name })),
  };
}

/** The report's name of the gradient of a rule's input or parameter in the tape (tape-e2e): `dX`, `dW_K`. */
export const paramGradName = (n: string): string => `d${n}`;

/** The tensors a kernel check of this kind compares, named as the report names them (what `coverage` expects to see exercised). */
export function expectedTensors(kind: "forward" | "backward" | "tape-e2e", decl: RuleDecl, frozen: boolean, style: NameStyle = "abi"): string[] {
  const states = stateNames(decl);
  const name = (k: TensorKey) => tensorName(k, frozen, style);
  switch (kind) {
    case "forward":
      return frozen ? ["y"] : ["y", ...states.map((n) => name({ part: "state", name: n }))];
    case "backward":
      // a frozen read's S (Titans, Atlas) has a zero gradient by the math: only M is expected to be exercised
      return frozen
        ? [name({ part: "grad", name: "q" }), name({ part: "dState0", name: states[0]! })]
        : [...(abiOf(decl.key)?.grads ?? []).map((g) => name({ part: "grad", name: gradInput(g) })), ...states.map((n) => name({ part: "dState0", name: n }))];
    case "tape-e2e":
      return ["y", paramGradName("X"), ...usedParams(decl).map(paramGradName)];
  }
}

/** Whether a tensor is stored in the state dtype (states and their gradients) rather than the storage dtype. */
export const isStateTensor = (k: TensorKey): boolean => k.part === "state" || k.part === "dState0";
/** The judge's groups: outputs (y, final state) and gradients. */
export const groupOf = (k: TensorKey): "out" | "grad" => (k.part === "grad" || k.part === "dState0" ? "grad" : "out");

/** Every tensor of a record with its key, in the order y, final states, input gradients, state gradients. */
export function entries<A>(r: SeqTensors<A>): [TensorKey, A][] {
  const out: [TensorKey, A][] = [];
  if (r.y !== undefined) out.push([{ part: "y" }, r.y]);
  for (const [name, a] of Object.entries(r.state)) out.push([{ part: "state", name }, a]);
  for (const [name, a] of Object.entries(r.grads)) out.push([{ part: "grad", name }, a]);
  for (const [name, a] of Object.entries(r.dState0)) out.push([{ part: "dState0", name }, a]);
  return out;
}

/** The tensor of a record under a key, or undefined. */
export function tensorAt<A>(r: SeqTensors<A>, k: TensorKey): A | undefined {
  return k.part === "y" ? r.y : k.part === "state" ? r.state[k.name] : k.part === "grad" ? r.grads[k.name] : r.dState0[k.name];
}

/** A record with `f` applied to every tensor (keys kept). */
export function mapSeq<A, B>(r: SeqTensors<A>, f: (a: A, k: TensorKey) => B): SeqTensors<B> {
  const out = emptySeq<B>();
  for (const [k, a] of entries(r)) setAt(out, k, f(a, k));
  return out;
}

/** Puts a tensor into a record under its key. */
export function setAt<A>(r: SeqTensors<A>, k: TensorKey, a: A): void {
  if (k.part === "y") r.y = a;
  else if (k.part === "state") r.state[k.name] = a;
  else if (k.part === "grad") r.grads[k.name] = a;
  else r.dState0[k.name] = a;
}

/**
 * The judge's items of a case (oracle/kernel-judge.ts), per sequence and tensor, named as the report
 * names them: every tensor the kernel gave, and with `all`, every tensor ref64 has that the kernel
 * did not give (a missing output fails). A tensor a reference lacks is zero.
 */
export function comparedItems(kernel: readonly SeqTensors[], ref64: readonly SeqTensors[], ref32: readonly SeqTensors[],
  frozen: boolean, style: NameStyle, all: boolean, names?: KernelNames): Compared[] {
  const items: Compared[] = [];
  kernel.forEach((kern, n) => {
    const keys = entries(kern).map(([k]) => k);
    if (all) for (const [k] of entries(ref64[n]!)) if (tensorAt(kern, k) === undefined) keys.push(k);
    for (const k of keys) {
      const got = tensorAt(kern, k), r64 = tensorAt(ref64[n]!, k), r32 = tensorAt(ref32[n]!, k);
      const len = (r64 ?? got)?.length ?? 0;
      const name = tensorName(k, frozen, style), label = names === undefined ? undefined : kernelLabel(k, name, names);
      items.push({
        name, group: groupOf(k), part: isStateTensor(k) ? "state" : "token", seq: n, kernel: got,
        ref64: r64 ?? new Float64Array(len), ref32: r32 ?? new Float64Array(len), ...(label !== undefined && label !== name ? { label } : {}),
      });
    }
  });
  return items;
}
