/**
 * Loads a library implementing ffi/nlk.h (ABI v2, docs/spec/kernel-abi.md) through bun:ffi. Memory
 * goes through the library (nlk_alloc, nlk_copy_in/out): a call's inputs are copied in, its outputs
 * are filled with NaN before the call (a forgotten output cannot pass), and copied out after it;
 * the forward's workspace stays in library memory until the caller frees it. Each rule's functions
 * are looked up separately: a library that lacks a rule still loads, and that rule is "not
 * implemented by <library>".
 */
import { dlopen, FFIType } from "bun:ffi";
import { roundTo, type StorageDType } from "../src/precision.ts";
import type { RuleConfig } from "../src/rules/types.ts";
import {
  ABI_VERSION, CHUNK_FORM_CODES, DTYPE_CODES, chunkFormSymbol, variantSymbols, FROZEN_FNS, PAIR_FNS, abiOf, gradInput, signature, symbolName, tokenElems,
  type KernelFn, type RuleAbi, type Shape,
} from "./abi.ts";
import { HAZARD_PLAN, probeRuns, type GuardedRun, type Hazard, type HazardPlan, type Poisoned } from "./hazards.ts";
import {
  HazardError, KernelError, LibraryError, type Arrays, type EmuControls, type Fn, type FrozenKernel, type KernelLib, type LibMemory, type PairVariants, type Pointers, type RulePair,
  type Workspace,
} from "./lib-types.ts";

export {
  HazardError, KernelError, LibraryError, type Arrays, type ChunkForm, type Device, type DTypes, type EmuControls, type FrozenKernel, type KernelLib,
  type LibMemory, type PairVariants, type Pointers, type RulePair, type Workspace,
} from "./lib-types.ts";

const FFI_OF: Record<string, FFIType> = { i32: FFIType.i32, f64: FFIType.f64, in: FFIType.ptr, "in?": FFIType.ptr, out: FFIType.ptr, ws: FFIType.ptr, size: FFIType.ptr };

function product(shape: number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

/** Hyperparameter values in ABI order (an enum as the index of its value). */
export function hyperValues(a: RuleAbi, cfg: RuleConfig): number[] {
  return a.hyper.map((h) => {
    const v = cfg[h.name];
    if (h.values) {
      const i = h.values.indexOf(String(v));
      if (i < 0) throw new Error(`${a.rule}: hyperparameter ${h.name} = '${v}' is not one of ${h.values.join(", ")}`);
      return i;
    }
    return Number(v);
  });
}

/**
 * A declared dtype name as the dtype a tensor crosses the ABI in: 2-byte bf16 or f16, else 4-byte
 * f32 (f32 itself, and anything unknown or wider: the bound covers f64 as f32).
 */
export function wireDType(name: string): StorageDType {
  return name === "bf16" || name === "f16" ? name : "f32";
}

const BYTES: Readonly<Record<StorageDType, number>> = { f32: 4, bf16: 2, f16: 2 };

/**
 * f32 values in a wire dtype's bits. bf16 is the upper half of the f32 bits of the value rounded
 * to bf16 (src/precision.ts roundTo, round to nearest even; a NaN is the quiet NaN 0x7fc0); f16
 * goes through the platform's Float16Array (round to nearest even). Every value the harness sends
 * is already representable (C5 rounds its inputs first), so the rounding here matters only for NaN
 * fills and for callers that pass wider values.
 */
export function encode(dtype: StorageDType, data: Float32Array): Float32Array | Uint16Array {
  if (dtype === "f32") return data;
  if (dtype === "f16") return new Uint16Array(new Float16Array(data).buffer);
  const rounded = Float32Array.from(data, (x) => roundTo("bf16", x)), u = new Uint32Array(rounded.buffer);
  const out = new Uint16Array(data.length);
  for (let i = 0; i < u.length; i++) out[i] = Number.isNaN(rounded[i]!) ? 0x7fc0 : u[i]! >>> 16;
  return out;
}

/** A wire dtype's bits as f32 values (exact: bf16 and f16 values are all f32 values). */
export function decode(dtype: StorageDType, bits: Float32Array | Uint16Array): Float32Array {
  if (dtype === "f32") return bits as Float32Array;
  if (dtype === "f16") return new Float32Array(new Float16Array(bits.buffer, bits.byteOffset, bits.length));
  const out = new Float32Array(bits.length), u = new Uint32Array(out.buffer);
  for (let i = 0; i < bits.length; i++) u[i] = bits[i]! << 16;
  return out;
}

/** Library memory: allocation, copies (converting to and from the wire dtype), NaN fill. */
class Memory implements LibMemory {
  constructor(private readonly s: Record<string, Fn>, private readonly check: (sym: string, st: number) => void) {}
  alloc(bytes: number): number {
    const out = new BigUint64Array(1);
    this.check("nlk_alloc", this.s.nlk_alloc!(bytes, out));
    return Number(out[0]!);
  }
  free(p: number | null): void {
    if (p !== null) this.check("nlk_free", this.s.nlk_free!(p));
  }
  upload(data: Float32Array, dtype: StorageDType = "f32"): number {
    const bits = encode(dtype, data);
    const p = this.alloc(bits.byteLength);
    if (bits.byteLength > 0) this.check("nlk_copy_in", this.s.nlk_copy_in!(p, bits, bits.byteLength));
    return p;
  }
  download(p: number, n: number, dtype: StorageDType = "f32"): Float32Array {
    const bits = dtype === "f32" ? new Float32Array(n) : new Uint16Array(n);
    if (n > 0) this.check("nlk_copy_out", this.s.nlk_copy_out!(bits, p, n * BYTES[dtype]));
    return decode(dtype, bits);
  }
  /** Raw bits into a fresh buffer of their size. */
  uploadBits(bits: Uint32Array | Uint16Array): number {
    const p = this.alloc(bits.byteLength);
    if (bits.byteLength > 0) this.check("nlk_copy_in", this.s.nlk_copy_in!(p, bits, bits.byteLength));
    return p;
  }
  /** n elements of a dtype's width as raw bits. */
  downloadBits(p: number, n: number, dtype: StorageDType): Uint32Array | Uint16Array {
    const bits = dtype === "f32" ? new Uint32Array(n) : new Uint16Array(n);
    if (n > 0) this.check("nlk_copy_out", this.s.nlk_copy_out!(bits, p, n * BYTES[dtype]));
    return bits;
  }
  /** An output buffer of n elements, filled with NaN so that an element the kernel does not write shows. */
  nanBuffer(n: number, dtype: StorageDType = "f32"): number {
    return this.upload(new Float32Array(n).fill(Number.NaN), dtype);
  }
}

interface Ctx {
  lib: string;
  mem: Memory;
  symbols: Record<string, Fn>;
  fail: (sym: string, st: number) => never;
  onCall: () => ((symbol: string) => void) | null;
  stateShapes: (rule: string, cfg: RuleConfig) => Record<string, number[]>;
  /** The wire dtypes a function declares (nlk_dtypes): storage tensors and states. */
  wire: (symbol: string) => { storage: StorageDType; state: StorageDType };
  /** The hazard plan of the library's calls (KernelLib.hazards) and a function's declared tolerance. */
  plan: () => HazardPlan;
  nondeterminism: (symbol: string) => number | null;
}

/** Bits of a wire dtype's values, as unsigned integers of its width. */
function rawBits(dtype: StorageDType, data: Float32Array): Uint32Array | Uint16Array {
  const e = encode(dtype, data);
  return e instanceof Float32Array ? new Uint32Array(e.buffer, e.byteOffset, e.length) : e;
}

/**
 * A buffer's bits with `g` guard elements of `pattern` before and after (docs/spec/hazards.md#guards);
 * the data start g elements in.
 */
function withGuards(bits: Uint32Array | Uint16Array, g: number, pattern: number): Uint32Array | Uint16Array {
  const full = bits instanceof Uint32Array ? new Uint32Array(bits.length + 2 * g) : new Uint16Array(bits.length + 2 * g);
  full.fill(pattern);
  full.set(bits, g);
  return full;
}

/** The elements of `now` that differ from `was` inside [from, to). */
function changed(was: Uint32Array | Uint16Array, now: Uint32Array | Uint16Array, from: number, to: number): number {
  let n = 0;
  for (let i = from; i < to; i++) if (was[i] !== now[i]) n++;
  return n;
}

/** The state a tensor parameter holds or is the gradient of (M_0, M, dM, dM_0 -> M), or null for a per-token tensor. */
function stateOfParam(a: RuleAbi, name: string): string | null {
  const bare = name.replace(/_0$/, "");
  return a.state.includes(bare) ? bare : bare.startsWith("d") && a.state.includes(bare.slice(1)) ? bare.slice(1) : null;
}

/** Elements of every tensor parameter of `fn` (states [B,H,...], per-token [B,T,H,d] or [B,T,H]). */
function elems(a: RuleAbi, ctx: Ctx, shape: Shape, cfg: RuleConfig): (name: string) => number {
  const st = ctx.stateShapes(a.rule, cfg);
  return (name) => {
    const stName = stateOfParam(a, name);
    if (stName !== null) return shape.B * shape.H * product(st[stName]!);
    if (name.startsWith("d") && name.length > 1 && (a.grads as readonly string[]).includes(name)) return tokenElems(a, gradInput(name as never), shape, cfg);
    return tokenElems(a, name === "dy" || name === "dq" ? "y" : name, shape, cfg);
  };
}

/**
 * One call under the hazard probes (docs/spec/hazards.md): the runs ffi/hazards.ts probeRuns asks
 * for, each a guarded call made here; the judged run's outputs, or a HazardError naming what the kernel did.
 */
function invoke(a: RuleAbi, fn: KernelFn, ctx: Ctx, shape: Shape, C: number, cfg: RuleConfig,
  given: Record<string, Float32Array | null>, ws: Workspace | null): Arrays {
  const sym = symbolName(a.rule, fn);
  // each run asked for by the plan (ffi/hazards.ts probeRuns) and made here
  const steps = probeRuns<GuardedRun & { arrays: Arrays }>(ctx.plan(), ctx.nondeterminism(sym));
  let next = steps.next();
  while (!next.done) next = steps.next(invokeOnce(a, fn, ctx, shape, C, cfg, given, ws, next.value));
  const p = next.value;
  if (p.hazards.length > 0) throw new HazardError(sym, p.hazards);
  return p.first.arrays;
}

/**
 * One guarded call: uploads `given` into buffers with guard regions (the poison, or the finite
 * pattern where `poisoned` leaves a tensor out), NaN-fills the outputs with a poisoned guard
 * before and after them, runs, downloads every buffer whole and frees them. Reports the outputs
 * and every write into an input or a guard.
 */
function invokeOnce(a: RuleAbi, fn: KernelFn, ctx: Ctx, shape: Shape, C: number, cfg: RuleConfig,
  given: Record<string, Float32Array | null>, ws: Workspace | null, poisoned: Poisoned): GuardedRun & { arrays: Arrays } {
  const sym = symbolName(a.rule, fn);
  const size = elems(a, ctx, shape, cfg);
  const w = ctx.wire(sym);
  const plan = ctx.plan();
  const dtypeOf = (name: string): StorageDType => (stateOfParam(a, name) !== null ? w.state : w.storage);
  const guardOf = (dtype: StorageDType) => plan.guard_bytes / BYTES[dtype];
  const hyper = hyperValues(a, cfg);
  const owned: number[] = [];
  type Buf = { name: string; base: number; full: Uint32Array | Uint16Array; n: number; g: number; dtype: StorageDType };
  const ins: Buf[] = [], outs: Buf[] = [];
  const args: unknown[] = [];
  const place = (name: string, data: Float32Array, pattern: number, into: Buf[]) => {
    const dtype = dtypeOf(name), g = guardOf(dtype);
    const full = withGuards(rawBits(dtype, data), g, pattern);
    const base = ctx.mem.uploadBits(full);
    owned.push(base);
    into.push({ name, base, full, n: data.length, g, dtype });
    args.push(base + plan.guard_bytes);
  };
  try {
    let hi = 0;
    for (const p of signature(a, fn)) {
      switch (p.kind) {
        case "i32":
        case "f64":
          args.push(p.hyper ? hyper[hi++] : p.name === "C" ? C : shape[p.name as keyof Shape]);
          break;
        case "in":
        case "in?": {
          const arr = given[p.name];
          if (arr === undefined || (arr === null && p.kind === "in")) throw new Error(`${sym}: input '${p.name}' missing`);
          if (arr === null) {
            args.push(null);
            break;
          }
          if (arr.length !== size(p.name)) throw new Error(`${sym}: input '${p.name}' has ${arr.length} elements, expected ${size(p.name)}`);
          const poison = poisoned === null || poisoned.includes(p.name);
          place(p.name, arr, (poison ? plan.poison : plan.finite)[dtypeOf(p.name)], ins);
          break;
        }
        case "out":
          // NaN-filled, so that an element the kernel does not write shows (docs/spec/kernel-abi.md)
          place(p.name, new Float32Array(size(p.name)).fill(Number.NaN), plan.poison[dtypeOf(p.name)], outs);
          break;
        case "ws":
          args.push(ws?.ptr ?? null);
          break;
        case "size":
          throw new Error(`${sym}: size queries go through workspaceBytes`);
      }
    }
    ctx.onCall()?.(sym);
    const st = ctx.symbols[sym]!(...args);
    if (st !== 0) ctx.fail(sym, st);
    const writes: Hazard[] = [];
    const read = (b: Buf) => ctx.mem.downloadBits(b.base, b.full.length, b.dtype);
    const guards = (b: Buf, now: Uint32Array | Uint16Array) => {
      const before = changed(b.full, now, 0, b.g), after = changed(b.full, now, b.g + b.n, b.full.length);
      if (before + after > 0) writes.push({ kind: "write-past-end", tensor: b.name, after, before });
    };
    for (const b of ins) {
      const now = read(b);
      const inside = changed(b.full, now, b.g, b.g + b.n);
      if (inside > 0) writes.push({ kind: "wrote-input", tensor: b.name, elements: inside, of: b.n });
      guards(b, now);
    }
    const arrays: Arrays = {};
    for (const b of outs) {
      const now = read(b);
      guards(b, now);
      const data = now.slice(b.g, b.g + b.n);
      arrays[b.name] = b.dtype === "f32" ? new Float32Array(data.buffer) : decode(b.dtype, data as Uint16Array);
    }
    return { arrays, outputs: outs.map((b) => [b.name, arrays[b.name]!] as const), writes, guarded: ins.map((b) => b.name) };
  } finally {
    for (const p of owned) ctx.mem.free(p);
  }
}

function rawCall(a: RuleAbi, fn: KernelFn, ctx: Ctx, shape: Shape, C: number, cfg: RuleConfig, ptrs: Pointers): void {
  const sym = symbolName(a.rule, fn);
  const hyper = hyperValues(a, cfg);
  let hi = 0;
  const args = signature(a, fn).map((p) => {
    if (p.kind === "i32" || p.kind === "f64") return p.hyper ? hyper[hi++] : p.name === "C" ? C : shape[p.name as keyof Shape];
    const v = ptrs[p.name];
    if (v === undefined) throw new Error(`${sym}: pointer '${p.name}' missing`);
    return v;
  });
  ctx.onCall()?.(sym);
  const st = ctx.symbols[sym]!(...args);
  if (st !== 0) ctx.fail(sym, st);
}

function sizeQuery(a: RuleAbi, fn: KernelFn, ctx: Ctx, shape: Shape, C: number, cfg: RuleConfig): number {
  const sym = symbolName(a.rule, fn);
  const out = new BigUint64Array(1);
  const hyper = hyperValues(a, cfg);
  let hi = 0;
  const args = signature(a, fn).map((p) => (p.kind === "size" ? out : p.hyper ? hyper[hi++] : p.name === "C" ? C : shape[p.name as keyof Shape]));
  ctx.onCall()?.(sym);
  const st = ctx.symbols[sym]!(...args);
  if (st !== 0) ctx.fail(sym, st);
  return Number(out[0]!);
}

function allocWorkspace(ctx: Ctx, bytes: number): Workspace {
  // the workspace is NaN-filled too: a backward that reads what the forward never wrote shows it
  const ptr = bytes === 0 ? null : ctx.mem.nanBuffer(Math.ceil(bytes / 4));
  let freed = false;
  return { ptr, bytes, free: () => { if (!freed) { freed = true; ctx.mem.free(ptr); } } };
}

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

function loadPair(path: string, a: RuleAbi, ctx0: Omit<Ctx, "symbols">): RulePair | string {
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

function loadFrozen(path: string, a: RuleAbi, ctx0: Omit<Ctx, "symbols">): FrozenKernel | string {
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
function libLabel(path: string): string {
  return path.split("/").pop() ?? path;
}

/** The longest variant name read (bytes, the terminating NUL included). */
const VARIANT_NAME_CAP = 256;

/**
 * The optional variant functions of a rule's pair (docs/spec/kernel-abi.md#variants): null when the
 * library exports neither (or lists none), a string saying what is wrong when it exports one of the
 * two, or its list cannot be read (a negative count, a count that changes, two variants of one name).
 */
function loadVariants(path: string, rule: string, statusString: (s: number) => string): PairVariants | null | string {
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

/**
 * Opens a kernel library. `stateShapes` maps (rule, cfg) to the rule's per-sequence state shapes
 * (the registry's stateShapes), passed in so this module does not depend on the rule registry.
 */
export function openKernelLib(path: string, stateShapes: (rule: string, cfg: RuleConfig) => Record<string, number[]>): KernelLib {
  let core;
  try {
    core = dlopen(path, {
      nlk_abi_version: { args: [], returns: FFIType.i32 },
      nlk_backend_name: { args: [], returns: FFIType.cstring },
      nlk_device_info: { args: [FFIType.ptr, FFIType.i32], returns: FFIType.i32 },
      nlk_device_peak_gbps: { args: [], returns: FFIType.f64 },
      nlk_last_kernel_ms: { args: [], returns: FFIType.f64 },
      nlk_status_string: { args: [FFIType.i32], returns: FFIType.cstring },
    }).symbols;
  } catch (e) {
    throw new LibraryError(`cannot load ${path} as an nlk kernel library: ${e instanceof Error ? e.message : String(e)}`);
  }
  const version = core.nlk_abi_version();
  if (version !== ABI_VERSION) {
    throw new LibraryError(`${path} implements nlk ABI version ${version}, this suite speaks version ${ABI_VERSION}: rebuild it against ffi/nlk.h`);
  }
  let memSyms: Record<string, Fn>;
  try {
    memSyms = dlopen(path, {
      nlk_alloc: { args: [FFIType.u64, FFIType.ptr], returns: FFIType.i32 },
      nlk_free: { args: [FFIType.ptr], returns: FFIType.i32 },
      nlk_copy_in: { args: [FFIType.ptr, FFIType.ptr, FFIType.u64], returns: FFIType.i32 },
      nlk_copy_out: { args: [FFIType.ptr, FFIType.ptr, FFIType.u64], returns: FFIType.i32 },
      nlk_synchronize: { args: [], returns: FFIType.i32 },
      nlk_dtypes: { args: [FFIType.cstring, FFIType.ptr, FFIType.ptr, FFIType.ptr], returns: FFIType.i32 },
    }).symbols as unknown as Record<string, Fn>;
  } catch (e) {
    throw new LibraryError(`${path} lacks the memory functions of nlk ABI ${ABI_VERSION} (nlk_alloc, nlk_free, nlk_copy_in, nlk_copy_out, nlk_synchronize, nlk_dtypes): ${e instanceof Error ? e.message : String(e)}`);
  }
  let emu: EmuControls | null = null;
  try {
    const e = dlopen(path, {
      nlk_emu_set_order: { args: [FFIType.i32], returns: FFIType.i32 },
      nlk_emu_set_mode: { args: [FFIType.i32], returns: FFIType.i32 },
      nlk_emu_set_block_policy: { args: [FFIType.i32], returns: FFIType.i32 },
      nlk_emu_error_detail: { args: [], returns: FFIType.cstring },
    }).symbols;
    emu = {
      setOrder: (r) => void e.nlk_emu_set_order(r ? 1 : 0),
      setMode: (t) => {
        const st = e.nlk_emu_set_mode(t ? 1 : 0);
        if (st !== 0) throw new Error(`nlk_emu_set_mode(${t ? 1 : 0}) returned ${st}`);
      },
      setGpuBlocks: (on) => void e.nlk_emu_set_block_policy(on ? 1 : 0),
      errorDetail: () => String(e.nlk_emu_error_detail()),
    };
  } catch {
    emu = null;
  }
  let raw: Record<string, Fn> = {};
  try {
    raw = dlopen(path, {
      nlk_test_crash: { args: [FFIType.i32], returns: FFIType.i32 },
      nlk_test_race: { args: [FFIType.i32, FFIType.ptr], returns: FFIType.i32 },
      nlk_test_divergent_sync: { args: [FFIType.i32], returns: FFIType.i32 },
    }).symbols as unknown as Record<string, Fn>;
  } catch {
    raw = {};
  }
  // optional (docs/spec/hazards.md#determinism): int nlk_nondeterminism(const char* fn, double* tolerance)
  let nondet: Fn | null = null;
  try {
    nondet = dlopen(path, { nlk_nondeterminism: { args: [FFIType.cstring, FFIType.ptr], returns: FFIType.i32 } }).symbols.nlk_nondeterminism as unknown as Fn;
  } catch {
    nondet = null;
  }
  const statusString = (s: number) => String(core.nlk_status_string(s));
  const fail = (sym: string, st: number): never => {
    const detail = statusString(st) + (emu !== null && st < -10 ? `: ${emu.errorDetail()}` : "");
    throw new KernelError(sym, st, detail);
  };
  const mem = new Memory(memSyms, (sym, st) => { if (st !== 0) fail(sym, st); });
  const lib: KernelLib = {
    path,
    backend: String(core.nlk_backend_name()),
    device() {
      const buf = new Uint8Array(256);
      const status = core.nlk_device_info(buf, buf.length);
      const end = buf.indexOf(0);
      return { status, name: new TextDecoder().decode(buf.subarray(0, end < 0 ? buf.length : end)) };
    },
    peakGbps: () => core.nlk_device_peak_gbps(),
    lastKernelMs: () => core.nlk_last_kernel_ms(),
    statusString,
    pair(rule) {
      if (!pairs.has(rule)) {
        const a = abiOf(rule);
        pairs.set(rule, a === undefined ? `no kernel ABI is defined for rule '${rule}'` : loadPair(path, a, ctx0));
      }
      return pairs.get(rule)!;
    },
    frozen(rule) {
      if (!frozens.has(rule)) {
        const a = abiOf(rule);
        frozens.set(rule, a === undefined ? `no kernel ABI is defined for rule '${rule}'` : loadFrozen(path, a, ctx0));
      }
      return frozens.get(rule)!;
    },
    dtypes(symbol) {
      const s = new Int32Array(1), st = new Int32Array(1), acc = new Int32Array(1);
      const status = memSyms.nlk_dtypes!(Buffer.from(`${symbol}\0`), s, st, acc);
      if (status !== 0) return `nlk_dtypes("${symbol}") returned ${status} (${statusString(status)})`;
      const name = (c: number) => DTYPE_CODES[c] ?? `unknown dtype code ${c}`;
      return { storage: name(s[0]!), state: name(st[0]!), accumulate: name(acc[0]!) };
    },
    chunkForm(rule) {
      const sym = chunkFormSymbol(rule);
      let query: Fn;
      try {
        query = dlopen(path, { [sym]: { args: [FFIType.ptr, FFIType.ptr], returns: FFIType.i32 } }).symbols[sym] as unknown as Fn;
      } catch {
        return { kind: "sequential", C: 1 };
      }
      const kind = new Int32Array(1), C = new Int32Array(1);
      const status = query(kind, C);
      if (status !== 0) return `${sym} returned ${status} (${statusString(status)})`;
      const name = CHUNK_FORM_CODES[kind[0]!];
      if (name === undefined) return `${sym} declared chunk form ${kind[0]}, which nlk.h does not define (NLK_CHUNK_*)`;
      if (name !== "sequential" && !(C[0]! >= 1)) return `${sym} declared ${name} with chunk size C = ${C[0]} (expected >= 1)`;
      return { kind: name, C: C[0]! };
    },
    variants(rule) {
      if (!variantSets.has(rule)) variantSets.set(rule, loadVariants(path, rule, statusString));
      return variantSets.get(rule)!;
    },
    memory: mem,
    onCall: null,
    hazards: HAZARD_PLAN,
    nondeterminism(symbol) {
      if (nondet === null) return null;
      const tol = new Float64Array(1);
      const status = nondet(Buffer.from(`${symbol}\0`), tol);
      // declared: a relative tolerance in (0, 1); anything else is no declaration (bitwise)
      return status === 0 && tol[0]! > 0 && tol[0]! < 1 ? tol[0]! : null;
    },
    emu,
    abiVersion: () => core.nlk_abi_version(),
    raw,
  };
  const pairs = new Map<string, RulePair | string>();
  const frozens = new Map<string, FrozenKernel | string>();
  const variantSets = new Map<string, PairVariants | null | string>();
  const wires = new Map<string, { storage: StorageDType; state: StorageDType }>();
  const wire = (symbol: string) => {
    if (!wires.has(symbol)) {
      // a library without a readable declaration is f32 (docs/spec/precision.md#declaration)
      const dt = lib.dtypes(symbol);
      wires.set(symbol, typeof dt === "string" ? { storage: "f32", state: "f32" } : { storage: wireDType(dt.storage), state: wireDType(dt.state) });
    }
    return wires.get(symbol)!;
  };
  const ctx0: Omit<Ctx, "symbols"> = {
    lib: `${lib.backend} (${libLabel(path)})`, mem, fail, onCall: () => lib.onCall, stateShapes, wire, plan: () => lib.hazards,
    nondeterminism: (symbol) => lib.nondeterminism(symbol),
  };
  return lib;
}
