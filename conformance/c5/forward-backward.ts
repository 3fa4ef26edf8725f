/**
 * C5 forward and backward cases: the kernel's outputs on a batch against the TypeScript reference
 * in f64 (ref64) and in f32 (ref32, the bound's yardstick), per tensor and sequence.
 */
import { symbolName } from "../../ffi/abi.ts";
import type { KernelLib } from "../../ffi/lib.ts";
import type { CaseOutcome } from "../../harness/check.ts";
import type { RuleDecl } from "../../src/rules/types.ts";
import type { Tensor } from "../../src/tensor.ts";
import { batchDy, batchInputs, batchQ, batchState, sequencesOf, slice, type KSpec } from "./batch.ts";
import { requirePair } from "./kernel-lib.ts";
import { flashCompare, type Compared } from "./compare.ts";

const noFrozenPair = (decl: RuleDecl): CaseOutcome => ({ ok: false, message: `no frozen kernel pair for ${decl.key}` });

/** y (and, unfrozen, every final state tensor) of the forward kernel. */
export function forwardCase(decl: RuleDecl, frozen: boolean, lib: KernelLib, k: KSpec, exercised: Set<string>): CaseOutcome {
  const pair = requirePair(lib, decl.key);
  const { seqs, cfg, B } = sequencesOf(decl, k, frozen);
  const items: Compared[] = [];
  if (frozen) {
    const fz = pair.frozen, fzAbi = pair.abi.frozen, ref = decl.frozen;
    if (fz === null || fzAbi === null || ref === null) return noFrozenPair(decl);
    const y = fz.forward(cfg, B, batchQ(seqs), batchState(fzAbi.state, seqs)).y;
    seqs.forEach((s, b) => items.push({
      name: "y", seq: b, kernel: slice(y, B, b),
      ref64: ref.forward(s.in64.q, s.st64, cfg).y.data, ref32: ref.forward(s.in32.q, s.st32, cfg).y.data,
    }));
    return flashCompare(items, exercised, symbolName(decl.key, "frozen_forward"));
  }
  const r = pair.forward(cfg, B, batchInputs(pair.abi, seqs), batchState(pair.abi.state, seqs));
  seqs.forEach((s, b) => {
    const r64 = decl.inner.forward(s.in64, s.st64, cfg), r32 = decl.inner.forward(s.in32, s.st32, cfg);
    items.push({ name: "y", seq: b, kernel: slice(r.y, B, b), ref64: r64.y.data, ref32: r32.y.data });
    for (const n of Object.keys(r64.finalState)) {
      const kst = r.state[n];
      items.push({ name: `state ${n}`, seq: b, kernel: kst && slice(kst, B, b), ref64: r64.finalState[n]!.data, ref32: r32.finalState[n]!.data });
    }
  });
  return flashCompare(items, exercised, symbolName(decl.key, "forward"));
}

/** Every gradient of the backward kernel (dq, frozen); one the reference leaves out is zero (InnerGrads). */
export function backwardCase(decl: RuleDecl, frozen: boolean, lib: KernelLib, k: KSpec, exercised: Set<string>): CaseOutcome {
  const pair = requirePair(lib, decl.key);
  const { seqs, cfg, B } = sequencesOf(decl, k, frozen);
  const dy = batchDy(seqs);
  const items: Compared[] = [];
  if (frozen) {
    const fz = pair.frozen, fzAbi = pair.abi.frozen, ref = decl.frozen;
    if (fz === null || fzAbi === null || ref === null) return noFrozenPair(decl);
    const q = batchQ(seqs), st = batchState(fzAbi.state, seqs);
    const f = fz.forward(cfg, B, q, st);
    const dq = fz.backward(cfg, B, q, st, f.saved, dy);
    seqs.forEach((s, b) => {
      const r64 = ref.forward(s.in64.q, s.st64, cfg), r32 = ref.forward(s.in32.q, s.st32, cfg);
      items.push({
        name: "dq", seq: b, kernel: slice(dq, B, b),
        ref64: ref.backward(r64.saved, s.in64.q, s.dy64, cfg).dq.data, ref32: ref.backward(r32.saved, s.in32.q, s.dy32, cfg).dq.data,
      });
    });
    return flashCompare(items, exercised, symbolName(decl.key, "frozen_backward"));
  }
  const inputs = batchInputs(pair.abi, seqs);
  const f = pair.forward(cfg, B, inputs, batchState(pair.abi.state, seqs));
  const g = pair.backward(cfg, B, inputs, f.saved, dy);
  seqs.forEach((s, b) => {
    const r64 = decl.inner.forward(s.in64, s.st64, cfg), r32 = decl.inner.forward(s.in32, s.st32, cfg);
    // The initial state's gradient (dState0) is not part of this kernel ABI: only the per-token gradients are compared.
    const { dState0: _s64, ...g64 } = decl.inner.backward(r64.saved, s.in64, s.dy64, cfg) as Record<string, Tensor | undefined>;
    const { dState0: _s32, ...g32 } = decl.inner.backward(r32.saved, s.in32, s.dy32, cfg) as Record<string, Tensor | undefined>;
    const names = new Set<string>([...pair.abi.grads, ...Object.keys(g64).filter((n) => g64[n] !== undefined)]);
    for (const n of names) {
      const ref64 = g64[n]?.data, ref32 = g32[n]?.data, kern = g[n] && slice(g[n], B, b);
      const length = (ref64 ?? kern)?.length ?? 0;
      items.push({
        name: n, seq: b, kernel: kern,
        // absent in the reference = zero (InnerGrads)
        ref64: ref64 ?? new Float64Array(length), ref32: ref32 ?? new Float64Array(length),
      });
    }
  });
  return flashCompare(items, exercised, symbolName(decl.key, "backward"));
}
