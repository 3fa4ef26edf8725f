/**
 * A rule's functions bound from a library (each rule separately: a library that lacks one still
 * loads, and that rule is "not implemented by <library>"): its pair and frozen read, calling through
 * ffi/lib-call.ts, and its optional variants (docs/spec/kernel-abi.md#variants).
 */
import { dlopen, FFIType } from "bun:ffi";
import { variantSymbols, FROZEN_FNS, PAIR_FNS, signature, symbolName, type KernelFn, type RuleAbi } from "./abi.ts";
import { KernelError, type Arrays, type Fn, type FrozenKernel, type PairVariants, type RulePair } from "./lib-types.ts";
import { allocWorkspace, invoke, rawCall, sizeQuery, type Ctx } from "./lib-call.ts";

const FFI_OF: Record<string, FFIType> = { i32: FFIType.i32, f64: FFIType.f64, in: FFIType.ptr, "in?": FFIType.ptr, out: FFIType.ptr, ws: FFIType.ptr, size: FFIType.ptr };

function bind(path: string, a: RuleAbi, fns: readonly KernelFn[]): Record<string, Fn> | string {
  const decls: Record<string, { args: FFIType[]; returns: FFIType }> = {};
  for (const fn of fns) decls[symbolName(a.rule, fn)] = { args: signature(a, fn).map((p) => FFI_OF[p.kind]!), returns: FFIType.i32 };
  try {
    return dlopen(path, decls).symbols as unknown as Record<string, Fn>;
  } catch (e) {
    const missing = /symbol "?(\w+)"?/i.exec(e instanceof Error ? e.message : String(e))?.[1];
    return missing !== undefined ? `${missing} is not exported` : e instanceof Error ? e.message : String(e);
  }
}

export function loadPair(path: string, a: RuleAbi, ctx0: Omit<Ctx, "symbols">): RulePair | string {
  const symbols = bind(path, a, PAIR_FNS);
  if (typeof symbols === "string") return `not implemented by ${ctx0.lib}: ${symbols}`;
  const ctx: Ctx = { ...ctx0, symbols };
  const withState = (names: readonly string[], suffix: string, arrs: Arrays | null, prefix = "") =>
    Object.fromEntries(names.map((n) => [`${prefix}${n}${suffix}`, arrs === null ? null : arrs[n]!]));
  return {
    abi: a,
    callRaw: (fn, shape, C, cfg, ptrs) => rawCall(a, fn, ctx, shape, C, cfg, ptrs),
    workspaceBytes: (shape, C, cfg) => sizeQuery(a, "workspace_bytes", ctx, shape, C, cfg),
    forward(shape, C, cfg, inputs, state0) {
      const ws = allocWorkspace(ctx, sizeQuery(a, "workspace_bytes", ctx, shape, C, cfg));
      try {
        const out = invoke(a, "forward", ctx, shape, C, cfg, { ...inputs, ...withState(a.state, "_0", state0) }, ws);
        return { y: out.y!, state: Object.fromEntries(a.state.map((n) => [n, out[n]!])), ws };
      } catch (e) {
        ws.free();
        throw e;
      }
    },
    backward(shape, C, cfg, inputs, state0, ws, dy, dFinal) {
      const given = { ...inputs, ...withState(a.state, "_0", state0), dy, ...withState(a.state, "", dFinal, "d") };
      const out = invoke(a, "backward", ctx, shape, C, cfg, given, ws);
      return {
        grads: Object.fromEntries(a.grads.map((g) => [g, out[g]!])),
        dState0: Object.fromEntries(a.state.map((n) => [n, out[`d${n}_0`]!])),
      };
    },
  };
}

export function loadFrozen(path: string, a: RuleAbi, ctx0: Omit<Ctx, "symbols">): FrozenKernel | string {
  if (!a.frozen) return `${a.rule} has no frozen read`;
  const symbols = bind(path, a, FROZEN_FNS);
  if (typeof symbols === "string") return `not implemented by ${ctx0.lib}: ${symbols}`;
  const ctx: Ctx = { ...ctx0, symbols };
  return {
    abi: a,
    callRaw: (fn, shape, cfg, ptrs) => rawCall(a, fn, ctx, shape, 1, cfg, ptrs),
    workspaceBytes: (shape, cfg) => sizeQuery(a, "frozen_workspace_bytes", ctx, shape, 1, cfg),
    forward(shape, cfg, q, state) {
      const ws = allocWorkspace(ctx, sizeQuery(a, "frozen_workspace_bytes", ctx, shape, 1, cfg));
      try {
        return { y: invoke(a, "frozen_forward", ctx, shape, 1, cfg, { q, ...state }, ws).y!, ws };
      } catch (e) {
        ws.free();
        throw e;
      }
    },
    backward(shape, cfg, q, state, ws, dy) {
      const out = invoke(a, "frozen_backward", ctx, shape, 1, cfg, { q, ...state, dy }, ws);
      return { dq: out.dq!, dState: Object.fromEntries(a.state.map((n) => [n, out[`d${n}`]!])) };
    },
  };
}

/** The name a library goes by in messages: its file name. */
export function libLabel(path: string): string {
  return path.split("/").pop() ?? path;
}

/** The longest variant name read (bytes, the terminating NUL included). */
const VARIANT_NAME_CAP = 256;

/**
 * The optional variant functions of a rule's pair (docs/spec/kernel-abi.md#variants): null when the
 * library exports neither (or lists none), a string saying what is wrong when it exports one of the
 * two, or its list cannot be read (a negative count, a count that changes, two variants of one name).
 */
export function loadVariants(path: string, rule: string, statusString: (s: number) => string): PairVariants | null | string {
  const sym = variantSymbols(rule);
  const bind = (name: string, args: FFIType[]): Fn | null => {
    try {
      return dlopen(path, { [name]: { args, returns: FFIType.i32 } }).symbols[name] as unknown as Fn;
    } catch {
      return null;
    }
  };
  const list = bind(sym.list, [FFIType.i32, FFIType.ptr, FFIType.i32]), set = bind(sym.set, [FFIType.i32]);
  if (list === null && set === null) return null;
  if (list === null || set === null) {
    return `${libLabel(path)} exports ${list === null ? sym.set : sym.list} without ${list === null ? sym.list : sym.set}: ` +
      "a pair's variants need both (docs/spec/kernel-abi.md#variants)";
  }
  const buf = new Uint8Array(VARIANT_NAME_CAP);
  const count = list(0, buf, buf.length) as number;
  if (!Number.isInteger(count) || count < 0) return `${sym.list}(0, name, ${buf.length}) returned ${count} (${statusString(count)}): expected the number of variants`;
  if (count === 0) return null;
  const names: string[] = [];
  for (let i = 0; i < count; i++) {
    buf.fill(0);
    const n = list(i, buf, buf.length) as number;
    if (n !== count) return `${sym.list}(${i}, name, ${buf.length}) returned ${n}, ${sym.list}(0, ...) ${count}: the count must not change`;
    const end = buf.indexOf(0);
    const name = new TextDecoder().decode(buf.subarray(0, end < 0 ? buf.length : end)).trim() || String(i);
    if (name === "default") return `${sym.list} names variant ${i} 'default', the name the library's own choice goes by in reports: name it otherwise`;
    if (names.includes(name)) return `${sym.list} names two variants '${name}' (${names.indexOf(name)} and ${i}): a failure must name the variant it is under`;
    names.push(name);
  }
  return {
    names,
    pin(index) {
      const st = set(index) as number;
      if (st !== 0) throw new KernelError(`${sym.set}(${index})`, st, statusString(st));
    },
  };
}
