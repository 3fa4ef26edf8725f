/**
 * Loads a library implementing ffi/nlk.h through bun:ffi and calls its kernel pairs on batched
 * f32 arrays. The identity symbols are required (an ABI version mismatch is an error); each rule's
 * four functions are looked up separately, so a library that lacks a rule still loads and that
 * rule reports "no kernel pair".
 */
import { dlopen, FFIType } from "bun:ffi";
import type { RuleConfig } from "../src/rules/types.ts";
import { ABI, ABI_VERSION, abiOf, inputShape, gradInput, pointerArgs, symbolName, type KernelFn, type RuleAbi } from "./abi.ts";

/** A kernel returned a non-zero status. */
export class KernelError extends Error {
  constructor(readonly symbol: string, readonly status: number, detail: string) {
    super(`${symbol} returned status ${status} (${detail})`);
  }
}

type Fn = (...args: unknown[]) => number;

export interface Device {
  status: number;
  name: string;
}

export type Arrays = Record<string, Float32Array>;

export interface KernelLib {
  readonly path: string;
  readonly backend: string;
  device(): Device;
  peakGbps(): number;
  lastKernelMs(): number;
  statusString(status: number): string;
  /** The rule's functions, or why they are missing. */
  pair(rule: string): RulePair | string;
  /** Present only in the cpu-emu build. */
  readonly emu: EmuControls | null;
  /** The no-op call used to measure the ffi overhead. */
  readonly abiVersion: () => number;
  /** Raw symbols of a test library (cpu-test build), when present. */
  readonly raw: Record<string, Fn>;
}

export interface EmuControls {
  setOrder(reversed: boolean): void;
  setMode(threads: boolean): void;
  /** Blocks sized as in the cuda build (whole warps) instead of the emulation's few threads. */
  setGpuBlocks(on: boolean): void;
  errorDetail(): string;
}

export interface Forward {
  y: Float32Array;
  state: Arrays;
  saved: Arrays;
}

export interface RulePair {
  readonly abi: RuleAbi;
  forward(cfg: RuleConfig, B: number, inputs: Arrays, state0: Arrays): Forward;
  backward(cfg: RuleConfig, B: number, inputs: Arrays, saved: Arrays, dy: Float32Array): Arrays;
  /** Null when the rule has no frozen read (SWA). */
  readonly frozen: null | {
    forward(cfg: RuleConfig, B: number, q: Float32Array, state: Arrays): { y: Float32Array; saved: Arrays };
    backward(cfg: RuleConfig, B: number, q: Float32Array, state: Arrays, saved: Arrays, dy: Float32Array): Float32Array;
  };
}

function product(shape: number[]): number {
  return shape.reduce((a, b) => a * b, 1);
}

/** Per-sequence element counts of every pointer argument of `fn`, by name. */
export function argSizes(a: RuleAbi, fn: KernelFn, cfg: RuleConfig, stateShapes: Record<string, number[]>): Record<string, number> {
  const sizes: Record<string, number> = { y: cfg.seq_len * cfg.d, dy: cfg.seq_len * cfg.d, dq: cfg.seq_len * cfg.d, q: cfg.seq_len * cfg.d };
  for (const n of a.inputs) sizes[n] = product(inputShape(n, cfg));
  for (const g of a.grads) sizes[g] = product(inputShape(gradInput(g), cfg));
  for (const [n, sh] of Object.entries(stateShapes)) {
    sizes[n] = product(sh);
    sizes[`${n}_0`] = product(sh);
  }
  for (const t of a.saved) sizes[t.name] = product(t.shape(cfg));
  if (fn.startsWith("frozen") && a.frozen !== null) for (const t of a.frozen.saved) sizes[t.name] = product(t.shape(cfg));
  return sizes;
}

function loadPair(path: string, a: RuleAbi, lib: { statusString(s: number): string; emu: EmuControls | null },
  stateShapes: (rule: string, cfg: RuleConfig) => Record<string, number[]>): RulePair | string {
  const fns: KernelFn[] = a.frozen === null ? ["forward", "backward"] : ["forward", "backward", "frozen_forward", "frozen_backward"];
  const decls: Record<string, { args: FFIType[]; returns: FFIType }> = {};
  for (const fn of fns) {
    const { inputs, outputs } = pointerArgs(a, fn);
    decls[symbolName(a.rule, fn)] = {
      args: [FFIType.i32, FFIType.i32, FFIType.i32, ...a.hyper.map((h) => (h.kind === "i32" ? FFIType.i32 : FFIType.f64)),
        ...inputs.map(() => FFIType.ptr), ...outputs.map(() => FFIType.ptr)],
      returns: FFIType.i32,
    };
  }
  let symbols: Record<string, Fn>;
  try {
    symbols = dlopen(path, decls).symbols as unknown as Record<string, Fn>;
  } catch (e) {
    return `no kernel pair for ${a.rule} in ${path}: ${e instanceof Error ? e.message : String(e)}`;
  }

  const call = (fn: KernelFn, cfg: RuleConfig, B: number, given: Arrays): Arrays => {
    const sym = symbolName(a.rule, fn);
    const { inputs, outputs } = pointerArgs(a, fn);
    const sizes = argSizes(a, fn, cfg, stateShapes(a.rule, cfg));
    const args: unknown[] = [B, cfg.seq_len, cfg.d, ...a.hyper.map((h) => h.value(cfg))];
    for (const n of inputs) {
      const arr = given[n];
      if (arr === undefined) throw new Error(`${sym}: input '${n}' missing`);
      if (arr.length !== B * sizes[n]!) throw new Error(`${sym}: input '${n}' has ${arr.length} elements, expected ${B} x ${sizes[n]}`);
      args.push(arr);
    }
    const out: Arrays = {};
    for (const n of outputs) args.push((out[n] = new Float32Array(B * sizes[n]!)));
    const status = symbols[sym]!(...args);
    if (status !== 0) {
      const detail = lib.statusString(status) + (lib.emu !== null && status < -10 ? `: ${lib.emu.errorDetail()}` : "");
      throw new KernelError(sym, status, detail);
    }
    return out;
  };

  const split = (out: Arrays, names: readonly string[]): Arrays => Object.fromEntries(names.map((n) => [n, out[n]!]));
  return {
    abi: a,
    forward(cfg, B, inputs, state0) {
      const given: Arrays = { ...inputs };
      for (const n of a.state) given[`${n}_0`] = state0[n]!;
      const out = call("forward", cfg, B, given);
      return { y: out.y!, state: split(out, a.state), saved: split(out, a.saved.map((t) => t.name)) };
    },
    backward(cfg, B, inputs, saved, dy) {
      return call("backward", cfg, B, { ...inputs, ...saved, dy });
    },
    frozen: a.frozen === null ? null : {
      forward(cfg, B, q, state) {
        const out = call("frozen_forward", cfg, B, { q, ...state });
        return { y: out.y!, saved: split(out, a.frozen!.saved.map((t) => t.name)) };
      },
      backward(cfg, B, q, state, saved, dy) {
        return call("frozen_backward", cfg, B, { q, ...state, ...saved, dy }).dq!;
      },
    },
  };
}

/** Thrown when a library cannot be used at all (missing identity symbols, wrong ABI version). */
export class LibraryError extends Error {}

/**
 * Opens a kernel library. `stateShapes` maps (rule, cfg) to the rule's state shapes (the registry's
 * stateShapes), passed in so this module does not depend on the rule registry.
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
  const statusString = (s: number) => String(core.nlk_status_string(s));
  const base = { statusString, emu };
  const pairs = new Map<string, RulePair | string>();
  return {
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
        pairs.set(rule, a === undefined ? `no kernel ABI is defined for rule '${rule}'` : loadPair(path, a, base, stateShapes));
      }
      return pairs.get(rule)!;
    },
    emu,
    abiVersion: () => core.nlk_abi_version(),
    raw,
  };
}

export { ABI };
