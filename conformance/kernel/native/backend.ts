/**
 * A native kernel library (ffi/nlk.h: `lib:<path>`, cpu-emu and the other builds of our .cu
 * sources) as a kernel backend (cases/kernel-backend.ts, docs/spec/kernel-abi.md#kernel-backends):
 * its declaration read from the library (nlk_dtypes, nlk_<rule>_chunk_form, which symbols it
 * exports), and forward and backward on a batch packed into the ABI's f32 tensors [B, T, H, w],
 * the outputs split per sequence. Its isolation is the kernel child process (child.ts native, spawn.ts).
 */
import { gradInput, symbolName, type GradName, type RuleAbi, type Shape } from "../../../ffi/abi.ts";
import type { Resolved } from "../../../ffi/backends.ts";
import { HazardError, type Arrays, type KernelLib } from "../../../ffi/lib-types.ts";
import { wireDType } from "../../../ffi/lib-wire.ts";
import type { KernelBackend, KernelDeclaration, KernelRun, Probe } from "../../../cases/kernel-backend.ts";
import { tokenWidth, unpackState, unpackTokens } from "../../../cases/kernel-layout.ts";
import type { SeqTensors } from "../../../oracle/kernel-case.ts";
import { F32_STORE_F64_ACC } from "../../../oracle/kernel-judge.ts";
import type { Precision } from "../../../src/precision.ts";
import type { RuleConfig, RuleDecl } from "../../../src/rules/types.ts";
import { batchDy, batchInputs, batchQ, batchState, type Seq } from "./abi-case.ts";
import type { AbiCaseSpec } from "../../../cases/kernel-batch.ts";
import { requireFrozen, requirePair } from "./kernel-lib.ts";

/** What a kernel run produced for one sequence. */
export type PerSeq = SeqTensors<Float32Array>;

/** One call's batch: the rule variant, its B·H sequences (f32 values for the kernel) and the case's C and NULL upstream gradients. */
export interface NativeBatch {
  readonly decl: RuleDecl;
  readonly frozen: boolean;
  readonly k: AbiCaseSpec;
  readonly seqs: Seq[];
  readonly cfg: RuleConfig;
  readonly shape: Shape;
}

/**
 * The precision the library declares for a function (docs/spec/precision.md#declaration): storage and
 * state f32, bf16 or f16 (skipReason turns anything else away), accumulate f32 or f64.
 */
export function declaredPrecision(lib: KernelLib, symbol: string): Precision {
  const dt = lib.dtypes(symbol);
  if (typeof dt === "string") return F32_STORE_F64_ACC;
  return { storage: wireDType(dt.storage), state: wireDType(dt.state), accumulate: dt.accumulate === "f32" ? "f32" : "f64" };
}

/**
 * Splits batched kernel outputs [B, T, H, w] and [B, H, ...] into per-sequence records; `cfg` gives
 * the rows per token of a tokenRows gradient (kernel-abi.md#token-rows).
 */
export function perSequence(a: Pick<RuleAbi, "channelGates">, shape: Shape, out: { y?: Float32Array; state?: Arrays; grads?: Arrays; dState0?: Arrays },
  cfg?: RuleConfig): PerSeq[] {
  const N = shape.B * shape.H;
  const tok = (arr: Float32Array, name: string, n: number) => {
    const w = tokenWidth(a, name, shape.d, cfg);
    return unpackTokens(arr, shape, w, n, new Float32Array(shape.T * w));
  };
  const each = (rec: Arrays | undefined, f: (a: Float32Array, name: string) => Float32Array) =>
    Object.fromEntries(Object.entries(rec ?? {}).map(([name, a]) => [name, f(a, name)]));
  return Array.from({ length: N }, (_, n) => ({
    ...(out.y !== undefined ? { y: tok(out.y, "y", n) } : {}),
    state: each(out.state, (a) => unpackState(a, N, n)),
    grads: each(out.grads, (a, name) => tok(a, name, n)),
    dState0: each(out.dState0, (a) => unpackState(a, N, n)),
  }));
}

/** The ABI's gradient outputs (dk, dalpha, ...) by input name. */
export const byInput = (grads: Arrays): Arrays => Object.fromEntries(Object.entries(grads).map(([g, a]) => [gradInput(g as GradName), a]));

/** Runs the kernels of one case: the forward's outputs and (backward) the gradients, per sequence. */
export function runKernels(decl: RuleDecl, frozen: boolean, lib: KernelLib, k: AbiCaseSpec, seqs: Seq[], cfg: RuleConfig, shape: Shape,
  withBackward: boolean): { forward: PerSeq[]; backward: PerSeq[] } {
  const dy = k.dyNull ? null : batchDy(seqs, shape);
  if (frozen) {
    const fz = requireFrozen(lib, decl.key);
    const q = batchQ(seqs, shape), st = batchState(fz.abi.state, seqs.map((s) => s.st32));
    const f = fz.forward(shape, cfg, q, st);
    try {
      const forward = perSequence(fz.abi, shape, { y: f.y });
      if (!withBackward) return { forward, backward: [] };
      const g = fz.backward(shape, cfg, q, st, f.ws, dy);
      return { forward, backward: perSequence(fz.abi, shape, { grads: { q: g.dq }, dState0: g.dState }) };
    } finally {
      f.ws.free();
    }
  }
  const pair = requirePair(lib, decl.key);
  const inputs = batchInputs(pair.abi, seqs, shape, cfg), st0 = batchState(pair.abi.state, seqs.map((s) => s.st32));
  const f = pair.forward(shape, k.C, cfg, inputs, st0);
  try {
    const forward = perSequence(pair.abi, shape, { y: f.y, state: f.state }, cfg);
    if (!withBackward) return { forward, backward: [] };
    const dFinal = k.dFinalNull ? null : batchState(pair.abi.state, seqs.map((s) => s.dFinal32));
    const g = pair.backward(shape, k.C, cfg, inputs, st0, f.ws, dy, dFinal);
    return { forward, backward: perSequence(pair.abi, shape, { grads: byInput(g.grads), dState0: g.dState0 }, cfg) };
  } finally {
    f.ws.free();
  }
}


/** The probe of a resolved backend (ffi/backends.ts) in the contract's terms. */
export function probeOf(r: Pick<Resolved, "info" | "problem">): Probe {
  if (r.info.available) return { available: true, device: r.info.device ?? "", ...(r.info.toolchain ? { toolchain: r.info.toolchain } : {}) };
  return { available: false, reason: r.info.reason ?? "unavailable", broken: r.problem === "broken" };
}

/**
 * Why a rule variant's kernels are not judged, or null: the library does not implement them (a
 * library may implement any subset of the rules), or it declares a precision C5 has no rule for
 * (docs/spec/precision.md#declaration).
 */
function notJudged(lib: KernelLib, rule: string, frozen: boolean): string | null {
  const k = frozen ? lib.frozen(rule) : lib.pair(rule);
  if (typeof k === "string") return k;
  const fn = symbolName(rule, frozen ? "frozen_forward" : "forward");
  const dt = lib.dtypes(fn);
  if (typeof dt === "string") return `${fn}: ${dt}`;
  const known = ["f32", "bf16", "f16"];
  if (!known.includes(dt.storage) || !known.includes(dt.state)) {
    return `${fn} stores ${dt.storage} (state ${dt.state}): C5 judges f32, bf16 and f16 storage and state (docs/spec/precision.md#declaration)`;
  }
  if (dt.accumulate !== "f32" && dt.accumulate !== "f64") return `${fn} accumulates in ${dt.accumulate}: only f64 and f32 accumulation are defined (docs/spec/precision.md#declaration)`;
  return null;
}

/** What the library declares for a rule variant (a frozen read has no chunk form: sequential). */
export function nativeDeclaration(lib: KernelLib, rule: string, frozen: boolean): KernelDeclaration {
  const chunkForm = frozen ? { kind: "sequential" as const, C: 0 } : lib.chunkForm(rule);
  const declared = typeof chunkForm === "string" || chunkForm.kind === "sequential" ? null : [chunkForm.C];
  return {
    skip: notJudged(lib, rule, frozen), undeclared: typeof (frozen ? lib.frozen(rule) : lib.pair(rule)) === "string",
    precision: {
      forward: declaredPrecision(lib, symbolName(rule, frozen ? "frozen_forward" : "forward")),
      backward: declaredPrecision(lib, symbolName(rule, frozen ? "frozen_backward" : "backward")),
    },
    chunkSizes: declared, chunkForm, varlen: false, forwardOnly: false,
  };
}

/** A run's outputs, or the hazards a guarded call found (a read past an input's end, a write into an input, two runs that differ). */
function guarded(phase: "forward" | "backward", b: NativeBatch, lib: KernelLib): KernelRun {
  try {
    const r = runKernels(b.decl, b.frozen, lib, b.k, b.seqs, b.cfg, b.shape, phase === "backward");
    return { perSeq: r[phase], hazards: [], who: symbolName(b.decl.key, b.frozen ? `frozen_${phase}` : phase) };
  } catch (e) {
    if (e instanceof HazardError) return { perSeq: [], hazards: e.hazards, who: e.symbol };
    throw e;
  }
}

/** A loaded library as a kernel backend; `resolved` is what loading it said (the probe). */
export function nativeBackend(lib: KernelLib, resolved?: Pick<Resolved, "info" | "problem">): KernelBackend<NativeBatch, true> {
  return {
    name: lib.backend, kind: "native",
    probe: () => (resolved !== undefined ? probeOf(resolved) : { available: true, device: lib.device().name }),
    declare: (rule, frozen) => nativeDeclaration(lib, rule, frozen),
    forward: (b) => guarded("forward", b, lib),
    backward: (b) => guarded("backward", b, lib),
    // the library stays loaded for the process's other checks; each call's workspace is freed by the call
    close: () => undefined,
  };
}
