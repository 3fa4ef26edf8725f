/**
 * Bitwise comparison of two runs of the same kernels on the same batch (race, thread mode):
 * any differing bit is a race between threads of a block.
 */
import { symbolName, type KernelFn } from "../../ffi/abi.ts";
import type { Arrays, RulePair } from "../../ffi/lib.ts";
import type { CaseOutcome } from "../../harness/check.ts";
import type { RuleDecl } from "../../src/rules/types.ts";
import { batchDy, batchInputs, batchQ, batchState, sequencesOf, type KSpec } from "./batch.ts";

/** Every output of every kernel of the variant, keyed `<symbol> <output>`. */
export function runAllKernels(decl: RuleDecl, frozen: boolean, pair: RulePair, k: KSpec): Record<string, Float32Array> {
  const { seqs, cfg, B } = sequencesOf(decl, k, frozen);
  const dy = batchDy(seqs);
  const out: Record<string, Float32Array> = {};
  const put = (fn: KernelFn, rec: Arrays) => {
    for (const [n, a] of Object.entries(rec)) out[`${symbolName(decl.key, fn)} ${n}`] = a;
  };
  if (frozen) {
    const fz = pair.frozen, fzAbi = pair.abi.frozen;
    if (fz === null || fzAbi === null) throw new Error(`no frozen kernel pair for ${decl.key}`);
    const q = batchQ(seqs), st = batchState(fzAbi.state, seqs);
    const f = fz.forward(cfg, B, q, st);
    put("frozen_forward", { y: f.y, ...f.saved });
    put("frozen_backward", { dq: fz.backward(cfg, B, q, st, f.saved, dy) });
  } else {
    const inputs = batchInputs(pair.abi, seqs);
    const f = pair.forward(cfg, B, inputs, batchState(pair.abi.state, seqs));
    put("forward", { y: f.y, ...f.state, ...f.saved });
    put("backward", pair.backward(cfg, B, inputs, f.saved, dy));
  }
  return out;
}

/** Index of the first element whose bits differ, or -1. */
function firstBitDiff(a: Float32Array, b: Float32Array): number {
  if (a.length !== b.length) return 0;
  const ua = new Uint32Array(a.buffer, a.byteOffset, a.length), ub = new Uint32Array(b.buffer, b.byteOffset, b.length);
  for (let i = 0; i < ua.length; i++) if (ua[i] !== ub[i]) return i;
  return -1;
}

export function compareRuns(a: Record<string, Float32Array>, b: Record<string, Float32Array>, what: string): CaseOutcome {
  for (const key of Object.keys(a)) {
    const i = firstBitDiff(a[key]!, b[key]!);
    if (i >= 0) {
      const [sym, name] = key.split(" ");
      return { ok: false, message: `${sym}: output ${name}[${i}] differs ${what}: ${a[key]![i]} vs ${b[key]![i]} — a race between threads of a block` };
    }
  }
  return { ok: true };
}
