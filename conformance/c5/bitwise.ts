/**
 * Bitwise comparison of two runs of the same kernels on the same batch (race, thread mode):
 * any differing bit is a race between threads of a block.
 */
import type { KernelLib } from "../../ffi/lib.ts";
import type { CaseOutcome } from "../../harness/check.ts";
import type { RuleDecl } from "../../src/rules/types.ts";
import { sequencesOf, type KSpec } from "./batch.ts";
import { runKernels } from "./forward-backward.ts";

/** Every output of every kernel of the variant, keyed `<fn> <output> <sequence>`. */
export function runAllKernels(decl: RuleDecl, frozen: boolean, lib: KernelLib, k: KSpec): Record<string, Float32Array> {
  const { seqs, cfg, shape } = sequencesOf(decl, k, frozen);
  const r = runKernels(decl, frozen, lib, k, seqs, cfg, shape, true);
  const out: Record<string, Float32Array> = {};
  const pre = `nlk_${decl.key}_${frozen ? "frozen_" : ""}`;
  r.forward.forEach((rec, n) => { for (const [name, a] of Object.entries(rec)) out[`${pre}forward ${name} ${n}`] = a; });
  r.backward.forEach((rec, n) => { for (const [name, a] of Object.entries(rec)) out[`${pre}backward ${name} ${n}`] = a; });
  return out;
}

/** Index of the first element whose bits differ, or -1. */
export function firstBitDiff(a: Float32Array, b: Float32Array): number {
  if (a.length !== b.length) return 0;
  const ua = new Uint32Array(a.buffer, a.byteOffset, a.length), ub = new Uint32Array(b.buffer, b.byteOffset, b.length);
  for (let i = 0; i < ua.length; i++) if (ua[i] !== ub[i]) return i;
  return -1;
}

export function compareRuns(a: Record<string, Float32Array>, b: Record<string, Float32Array>, what: string): CaseOutcome {
  for (const key of Object.keys(a)) {
    const i = firstBitDiff(a[key]!, b[key]!);
    if (i >= 0) {
      const [sym, name, seq] = key.split(" ");
      return { ok: false, message: `${sym}: output ${name} (sequence ${seq})[${i}] differs ${what}: ${a[key]![i]} vs ${b[key]![i]} — a race between threads of a block` };
    }
  }
  return { ok: true };
}
