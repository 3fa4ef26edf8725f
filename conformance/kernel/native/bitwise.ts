/**
 * Bitwise comparison of two runs of the same kernels on the same batch (race, thread mode):
 * any differing bit is a race between threads of a block.
 */
import type { KernelLib } from "../../../ffi/lib-types.ts";
import type { CaseOutcome } from "../../../harness/check.ts";
import type { RuleDecl } from "../../../src/rules/types.ts";
import { entries, tensorName } from "../../../cases/kernel-tensors.ts";
import { sequencesOf } from "./abi-case.ts";
import type { AbiCaseSpec } from "../../../cases/kernel-batch.ts";
import { runKernels } from "./backend.ts";

/** One output array of a kernel run: the function that wrote it, the tensor, and the sequence (if per sequence). */
export interface RunOutput {
  readonly fn: string;
  readonly name: string;
  readonly seq?: number;
  readonly data: Float32Array;
}

/** Every output of every kernel of the variant, per sequence, in a fixed order. */
export function runAllKernels(decl: RuleDecl, frozen: boolean, lib: KernelLib, k: AbiCaseSpec): RunOutput[] {
  const { seqs, cfg, shape } = sequencesOf(decl, k, frozen);
  const r = runKernels(decl, frozen, lib, k, seqs, cfg, shape, true);
  const out: RunOutput[] = [];
  const pre = `nlk_${decl.key}_${frozen ? "frozen_" : ""}`;
  for (const [phase, recs] of [["forward", r.forward], ["backward", r.backward]] as const) {
    recs.forEach((rec, seq) => { for (const [key, data] of entries(rec)) out.push({ fn: `${pre}${phase}`, name: tensorName(key, frozen), seq, data }); });
  }
  return out;
}

/** Index of the first element whose bits differ, or -1. */
export function firstBitDiff(a: Float32Array, b: Float32Array): number {
  if (a.length !== b.length) return 0;
  const ua = new Uint32Array(a.buffer, a.byteOffset, a.length), ub = new Uint32Array(b.buffer, b.byteOffset, b.length);
  for (let i = 0; i < ua.length; i++) if (ua[i] !== ub[i]) return i;
  return -1;
}

/** The two runs' outputs bit for bit; a run that produced nothing, or other outputs, proves nothing and fails. */
export function compareRuns(a: readonly RunOutput[], b: readonly RunOutput[], what: string): CaseOutcome {
  if (a.length === 0 || a.length !== b.length || a.some((x, j) => x.fn !== b[j]!.fn || x.name !== b[j]!.name || x.data.length === 0)) {
    return { ok: false, message: `the two runs do not give the same non-empty outputs (${a.length} and ${b.length} arrays) ${what}` };
  }
  for (let j = 0; j < a.length; j++) {
    const x = a[j]!, y = b[j]!;
    const i = firstBitDiff(x.data, y.data);
    if (i >= 0) {
      const where = x.seq === undefined ? `${x.name}[${i}]` : `${x.name} (sequence ${x.seq})[${i}]`;
      return { ok: false, message: `${x.fn}: output ${where} differs ${what}: ${x.data[i]} vs ${y.data[i]} — a race between threads of a block` };
    }
  }
  return { ok: true };
}
