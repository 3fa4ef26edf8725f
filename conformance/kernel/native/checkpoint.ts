/**
 * The checks of the v2 contract beyond forward and backward (docs/spec/kernel-abi.md):
 *   checkpoint  the same batch at C = 1, 4, 16: y and the final state bitwise equal for every C;
 *               the gradients bitwise equal where the library says its arithmetic order does not
 *               depend on C (ours: cpu-emu); and a second backward on the same workspace gives
 *               the first one's bits (the backward must not destroy what the forward saved)
 *   chunks      a T = 24 sequence cut into 3 chunks of 8 tokens (final state threaded forward,
 *               d(initial state) threaded back) against one call on the whole sequence
 *   workspace   the size query: workspace(C = 16) <= workspace(C = 1) / 8 at d = 64, T = 256
 */
import type { RuleAbi, Shape } from "../../../ffi/abi.ts";
import type { Arrays, KernelLib, RulePair } from "../../../ffi/lib-types.ts";
import type { CaseOutcome } from "../../../harness/check.ts";
import { withDefaults } from "../../../src/rules/level.ts";
import type { InnerGrads, InnerInputs, RuleConfig, RuleDecl, State } from "../../../src/rules/types.ts";
import { concat } from "../../../src/numeric.ts";
import { Tensor } from "../../../src/tensor.ts";
import { batchDy, batchInputs, batchState, sequencesOf } from "./abi-case.ts";
import { asStored } from "../../../cases/kernel-phase.ts";
import { CHECKPOINTS, type AbiCaseSpec } from "../../../cases/kernel-batch.ts";
import { tokenWidth } from "../../../cases/kernel-layout.ts";
import { comparedItems, entries, fromInnerGrads, isStateTensor, tensorAt, tensorName, type TensorKey } from "../../../cases/kernel-tensors.ts";
import { gradInput, type GradName } from "../../../ffi/abi.ts";
import { firstBitDiff } from "./bitwise.ts";
import { elementAt, flashCompare } from "../../../oracle/kernel-judge.ts";
import { byInput, declaredPrecision, perSequence, runKernels, type PerSeq } from "./backend.ts";
import { plainYardstickSeq } from "../../../oracle/plain-reference.ts";
import type { SeqTensors } from "../../../oracle/kernel-case.ts";
import { requirePair } from "./kernel-lib.ts";

/** Element `i` of sequence `n`'s tensor `key` in the batch: (b, t, h, i) of a token tensor, (b, h, i, j) of a square state. */
function elementOf(key: TensorKey, n: number, data: ArrayLike<number>, i: number, shape: Shape): string {
  return elementAt({ part: isStateTensor(key) ? "state" : "token", seq: n, ref64: data }, i, { B: shape.B, H: shape.H, T: shape.T });
}

function compareBits(a: PerSeq[], b: PerSeq[], what: string, shape: Shape): string | null {
  for (let n = 0; n < a.length; n++) {
    for (const [key, x] of entries(a[n]!)) {
      const name = tensorName(key, false), y = b[n] === undefined ? undefined : tensorAt(b[n]!, key);
      if (y === undefined) return `${name} missing ${what}`;
      const i = firstBitDiff(x, y);
      if (i >= 0) return `${name} (sequence ${n}) at ${elementOf(key, n, x, i, shape)} differs ${what}: ${x[i]} vs ${y[i]}`;
    }
  }
  return null;
}

/** Forward bitwise across C; gradients bitwise across C when `bitwiseGrads`; backward twice bitwise. */
export function checkpointCase(decl: RuleDecl, lib: KernelLib, k: AbiCaseSpec, bitwiseGrads: boolean): CaseOutcome {
  const pair = requirePair(lib, decl.key);
  const { seqs, cfg, shape } = sequencesOf(decl, k, false);
  const runs = CHECKPOINTS.map((C) => runKernels(decl, false, lib, { ...k, C }, seqs, cfg, shape, true));
  for (let i = 1; i < runs.length; i++) {
    const f = compareBits(runs[0]!.forward, runs[i]!.forward, `between C = ${CHECKPOINTS[0]} and C = ${CHECKPOINTS[i]} (the forward must not depend on C)`, shape);
    if (f !== null) return { ok: false, message: `nlk_${decl.key}_forward: ${f}` };
    if (bitwiseGrads) {
      const g = compareBits(runs[0]!.backward, runs[i]!.backward, `between C = ${CHECKPOINTS[0]} and C = ${CHECKPOINTS[i]} (the recomputed states must be the forward's)`, shape);
      if (g !== null) return { ok: false, message: `nlk_${decl.key}_backward: ${g}` };
    }
  }
  // a second backward on the same workspace
  const inputs = batchInputs(pair.abi, seqs, shape, cfg), st0 = batchState(pair.abi.state, seqs.map((s) => s.st32));
  const dy = k.dyNull ? null : batchDy(seqs, shape);
  const dFinal = k.dFinalNull ? null : batchState(pair.abi.state, seqs.map((s) => s.dFinal32));
  const f = pair.forward(shape, k.C, cfg, inputs, st0);
  try {
    const g1 = pair.backward(shape, k.C, cfg, inputs, st0, f.ws, dy, dFinal);
    const g2 = pair.backward(shape, k.C, cfg, inputs, st0, f.ws, dy, dFinal);
    const d = compareBits(perSequence(pair.abi, shape, { grads: byInput(g1.grads), dState0: g1.dState0 }, cfg), perSequence(pair.abi, shape, { grads: byInput(g2.grads), dState0: g2.dState0 }, cfg),
      `between two backward calls on one workspace (C = ${k.C}): the backward changed what the forward saved`, shape);
    if (d !== null) return { ok: false, message: `nlk_${decl.key}_backward: ${d}` };
  } finally {
    f.ws.free();
  }
  return { ok: true };
}

/** Tokens t0 .. t1−1 of an ABI tensor [B, T, H, w]. */
function tokenSlice(a: Float32Array, s: Shape, w: number, t0: number, t1: number): Float32Array {
  const T = t1 - t0, out = new Float32Array(s.B * T * s.H * w), row = s.H * w;
  for (let b = 0; b < s.B; b++) out.set(a.subarray((b * s.T + t0) * row, (b * s.T + t1) * row), b * T * row);
  return out;
}

/** Chunks of an ABI tensor [B, Tc, H, w] joined along T. */
function tokenJoin(parts: Float32Array[], s: Shape, w: number): Float32Array {
  const out = new Float32Array(s.B * s.T * s.H * w), row = s.H * w;
  let t0 = 0;
  for (const p of parts) {
    const T = p.length / (s.B * row);
    for (let b = 0; b < s.B; b++) out.set(p.subarray(b * T * row, (b + 1) * T * row), (b * s.T + t0) * row);
    t0 += T;
  }
  return out;
}

export const CHUNK_T = 24;
const CHUNK = 8;

function sliceAll(abi: Pick<RuleAbi, "channelGates">, rec: Arrays, s: Shape, t0: number, t1: number, cfg: RuleConfig): Arrays {
  return Object.fromEntries(Object.entries(rec).map(([n, a]) => [n, tokenSlice(a, s, tokenWidth(abi, n, s.d, cfg), t0, t1)]));
}

/** Tokens t0 .. t1−1 of a per-token reference tensor ([s, d] or a gate [s]). */
function sliceTokens(t: Tensor, t0: number, t1: number): Tensor {
  const w = t.shape.length > 1 ? t.shape[1]! : 1;
  return new Tensor(t.dtype, t.shape.length > 1 ? [t1 - t0, w] : [t1 - t0], t.data.slice(t0 * w, t1 * w));
}

function sliceInner(inp: InnerInputs, t0: number, t1: number): InnerInputs {
  const out: Record<string, Tensor> = {};
  for (const [n, t] of Object.entries(inp)) if (t instanceof Tensor) out[n] = sliceTokens(t, t0, t1);
  return out as unknown as InnerInputs;
}

/**
 * The reference pair run the way the chunked kernel calls ran: three calls of CHUNK tokens, the
 * final state threaded forward and d(initial state) threaded back. y, the final state and every
 * gradient, flat, named as the kernel's per-sequence records.
 */
function chunkedReference(decl: RuleDecl, cfg: RuleConfig, inp: InnerInputs, st: State, dy: Tensor, dFinal: State): SeqTensors {
  const cCfg = withDefaults(decl, { ...cfg, seq_len: CHUNK });
  const chunks = [0, 1, 2].map((i) => sliceInner(inp, i * CHUNK, (i + 1) * CHUNK));
  const states: State[] = [st], saved = [];
  const ys: ArrayLike<number>[] = [];
  for (let i = 0; i < 3; i++) {
    const f = decl.inner.forward(chunks[i]!, states[i]!, cCfg);
    ys.push(f.y.data);
    saved.push(f.saved);
    states.push(f.finalState);
  }
  const grads: Record<string, ArrayLike<number>>[] = [];
  let dF: State = dFinal;
  for (let i = 2; i >= 0; i--) {
    const { dState0, ...g } = decl.inner.backward(saved[i]!, chunks[i]!, sliceTokens(dy, i * CHUNK, (i + 1) * CHUNK), cCfg, dF);
    grads[i] = Object.fromEntries(Object.entries(g).filter(([, t]) => t instanceof Tensor).map(([n, t]) => [n, (t as Tensor).data]));
    dF = dState0 ?? {};
  }
  const out: SeqTensors = { y: concat(ys), state: {}, grads: {}, dState0: {} };
  for (const [n, t] of Object.entries(states[3]!)) out.state[n] = t.data;
  for (const n of Object.keys(grads[0]!)) out.grads[gradInput(n as GradName)] = concat(grads.map((g) => g[n]!));
  for (const [n, t] of Object.entries(dF)) out.dState0[n] = t.data;
  return out;
}

/**
 * One call on T = 24 tokens against three calls on 8 (docs/spec/kernel-abi.md#chunks).
 *
 * For a rule whose calls are independent of where a sequence is cut (no state derived at the start
 * of a call), y and the final state must be bitwise equal to one call (the forward's state is f32
 * either way); the gradients are compared with the flash-attention bound against the reference,
 * because at a chunk boundary the state adjoint crosses the ABI as f32 (inside one call a kernel
 * may carry it wider, as ours does in f64).
 *
 * A rule that derives state at the start of every call (Moneta's L_q accumulator, YAAD's boundary
 * snapshot: `derivedState`) computes a different function when the sequence is cut, by its math
 * (docs/spec/miras-compression.md#initial-state). There the three kernel calls are compared, y,
 * final state and gradients alike, with the reference run as the same three calls.
 */
export function chunkCase(decl: RuleDecl, lib: KernelLib, k: AbiCaseSpec, exercised: Set<string>): CaseOutcome {
  const pair: RulePair = requirePair(lib, decl.key);
  const precision = declaredPrecision(lib, `nlk_${decl.key}_backward`);
  const { seqs, cfg, shape } = sequencesOf(decl, k, false, precision);
  if (shape.T !== CHUNK_T) throw new Error(`chunk case with T = ${shape.T}, expected ${CHUNK_T}`);
  const splitNeutral = decl.derivedState === undefined;
  const inputs = batchInputs(pair.abi, seqs, shape, cfg), st0 = batchState(pair.abi.state, seqs.map((s) => s.st32));
  const dy = batchDy(seqs, shape), dFinal = batchState(pair.abi.state, seqs.map((s) => s.dFinal32));
  const whole = runKernels(decl, false, lib, { ...k, dyNull: false, dFinalNull: false }, seqs, cfg, shape, true);
  // forward chunk by chunk
  const cShape: Shape = { ...shape, T: CHUNK }, cCfg = withDefaults(decl, { ...cfg, seq_len: CHUNK });
  const ys: Float32Array[] = [], states: Arrays[] = [st0], wss = [];
  const chunkInputs = [0, 1, 2].map((i) => sliceAll(pair.abi, inputs, shape, i * CHUNK, (i + 1) * CHUNK, cfg));
  try {
    for (let i = 0; i < 3; i++) {
      const f = pair.forward(cShape, k.C, cCfg, chunkInputs[i]!, states[i]!);
      wss.push(f.ws);
      ys.push(f.y);
      states.push(f.state);
    }
    const fwd = perSequence(pair.abi, shape, { y: tokenJoin(ys, shape, shape.d), state: states[3]! }, cfg);
    if (splitNeutral) {
      for (let n = 0; n < fwd.length; n++) {
        for (const [key, a] of entries(fwd[n]!)) {
          const b = tensorAt(whole.forward[n]!, key)!;
          const i = firstBitDiff(a, b);
          if (i >= 0) return { ok: false, message: `${tensorName(key, false)} (sequence ${n}) at ${elementOf(key, n, a, i, shape)}: three chunks of ${CHUNK} give ${a[i]}, one call ${b[i]} (must be bitwise equal)` };
        }
      }
    }
    // backward chunk by chunk, d(initial state) of chunk i+1 as d(final state) of chunk i
    const grads: Arrays[] = [];
    let dF: Arrays = dFinal;
    for (let i = 2; i >= 0; i--) {
      const g = pair.backward(cShape, k.C, cCfg, chunkInputs[i]!, states[i]!, wss[i]!, tokenSlice(dy, shape, shape.d, i * CHUNK, (i + 1) * CHUNK), dF);
      grads[i] = g.grads;
      dF = g.dState0;
    }
    const joined: Arrays = {};
    for (const gname of pair.abi.grads) joined[gname] = tokenJoin(grads.map((g) => g[gname]!), shape, tokenWidth(pair.abi, gname, shape.d, cfg));
    const chunked = perSequence(pair.abi, shape, { grads: byInput(joined), dState0: dF }, cfg);
    const kernels: SeqTensors[] = [], refs64: SeqTensors[] = [], refs32: SeqTensors[] = [];
    seqs.forEach((s, n) => {
      const flat = (r: InnerGrads): SeqTensors => ({ state: {}, ...fromInnerGrads(r) });
      // ref64: the whole sequence, or (derived state) the same three calls
      const a64 = splitNeutral ? flat(decl.inner.backward(decl.inner.forward(s.in64, s.st64, cfg).saved, s.in64, s.dy64, cfg, s.dFinal64))
        : chunkedReference(decl, cfg, s.in64, s.st64, s.dy64, s.dFinal64);
      // The plain reference runs as the kernel did, three calls with the state and its gradient
      // crossing the ABI in the state dtype between them: those roundings are the ABI's, not the kernel's.
      const a32 = plainYardstickSeq(precision.accumulate, a64, () =>
        asStored(chunkedReference(decl, cfg, s.in32, s.st32, s.dy32, s.dFinal32), precision));
      kernels.push(splitNeutral ? chunked[n]! : { ...chunked[n]!, y: fwd[n]!.y, state: fwd[n]!.state });
      refs64.push(a64);
      refs32.push(a32);
    });
    const items = comparedItems(kernels, refs64, refs32, false, "abi", false);
    const who = `nlk_${decl.key} over three chunks of ${CHUNK}${splitNeutral ? "" : " (against the reference cut the same way)"}`;
    const r = flashCompare(items, exercised, who, precision, { layout: { B: shape.B, H: shape.H, T: shape.T, C: CHUNK }, prefilled: true });
    if (!splitNeutral) return r.ok ? { ...r, message: "the rule derives state at each call: compared with the reference run as the same three calls" } : r;
    const same = compareBits(chunked, whole.backward, "", shape);
    return r.ok ? { ...r, message: same === null ? "gradients bitwise equal to one call" : `gradients within the bound; not bitwise equal to one call (${same.trim()})` } : r;
  } finally {
    for (const w of wss) w.free();
  }
}

/** The size query at d = 64, T = 256 (and d = 128): C = 16 must need at most 1/8 of C = 1. */
export function workspaceBound(decl: RuleDecl, lib: KernelLib): CaseOutcome {
  const pair = requirePair(lib, decl.key);
  const sizes: string[] = [];
  let ratio = 0;
  for (const d of [64, 128]) {
    const cfg = withDefaults(decl, { d, seq_len: 256 });
    const shape: Shape = { B: 1, T: 256, H: 1, d };
    const b = Object.fromEntries([1, 4, 16].map((C) => [C, pair.workspaceBytes(shape, C, cfg)]));
    sizes.push(`d=${d}: C=1 ${b[1]} B, C=4 ${b[4]} B, C=16 ${b[16]} B`);
    if (d === 64) ratio = b[1] === 0 ? 0 : b[16]! / b[1]!;
  }
  const msg = `workspace per sequence (B = H = 1, T = 256): ${sizes.join("; ")}; C=16/C=1 at d=64: ${ratio.toFixed(4)}`;
  return ratio <= 1 / 8 ? { ok: true, message: msg } : { ok: false, message: `${msg} > 1/8: the checkpointed workspace is not O(T/C · d²)` };
}
