/**
 * Loads a library implementing ffi/nlk.h (ABI v2, docs/spec/kernel-abi.md) through bun:ffi: its
 * core, memory, emulation and test functions, its declarations (dtypes, chunk form, variants,
 * nondeterminism), and each rule's pair and frozen read on demand. Memory goes through the library
 * (ffi/lib-wire.ts: a call's inputs are copied in, its outputs NaN-filled before the call, so a
 * forgotten output cannot pass); a call runs under the hazard probes (ffi/lib-call.ts); each rule's
 * functions are looked up separately (ffi/lib-load.ts): a library that lacks a rule still loads, and
 * that rule is "not implemented by <library>".
 */
import { dlopen, FFIType } from "bun:ffi";
import type { StorageDType } from "../src/precision.ts";
import type { RuleConfig } from "../src/rules/types.ts";
import { ABI_VERSION, CHUNK_FORM_CODES, DTYPE_CODES, chunkFormSymbol, abiOf } from "./abi.ts";
import { HAZARD_PLAN } from "./hazards.ts";
import { KernelError, LibraryError, type EmuControls, type Fn, type FrozenKernel, type KernelLib, type PairVariants, type RulePair } from "./lib-types.ts";
import type { Ctx } from "./lib-call.ts";
import { libLabel, loadFrozen, loadPair, loadVariants } from "./lib-load.ts";
import { Memory, wireDType } from "./lib-wire.ts";

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
