/**
 * One call of a library's kernel function (docs/spec/kernel-abi.md): its arguments in the ABI's
 * order, and the call under the hazard probes (docs/spec/hazards.md) — inputs uploaded between guard
 * regions, outputs NaN-filled, every buffer read back whole — or raw (caller's pointers), a size
 * query, and a NaN-filled workspace.
 */
import type { StorageDType } from "../src/precision.ts";
import type { RuleConfig } from "../src/rules/types.ts";
import { gradInput, signature, symbolName, tokenElems, type KernelFn, type RuleAbi, type Shape } from "./abi.ts";
import { probeRuns, type GuardedRun, type Hazard, type HazardPlan, type Poisoned } from "./hazards.ts";
import { HazardError, type Arrays, type Fn, type Pointers, type Workspace } from "./lib-types.ts";
import { BYTES, decode, rawBits, type Memory } from "./lib-wire.ts";

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

/** What a call needs of its library: its memory, its functions, how it fails and announces a call, and its declarations. */
export interface Ctx {
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
export function invoke(a: RuleAbi, fn: KernelFn, ctx: Ctx, shape: Shape, C: number, cfg: RuleConfig,
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

export function rawCall(a: RuleAbi, fn: KernelFn, ctx: Ctx, shape: Shape, C: number, cfg: RuleConfig, ptrs: Pointers): void {
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

export function sizeQuery(a: RuleAbi, fn: KernelFn, ctx: Ctx, shape: Shape, C: number, cfg: RuleConfig): number {
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

export function allocWorkspace(ctx: Ctx, bytes: number): Workspace {
  // the workspace is NaN-filled too: a backward that reads what the forward never wrote shows it
  const ptr = bytes === 0 ? null : ctx.mem.nanBuffer(Math.ceil(bytes / 4));
  let freed = false;
  return { ptr, bytes, free: () => { if (!freed) { freed = true; ctx.mem.free(ptr); } } };
}
