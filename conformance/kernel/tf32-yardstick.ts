/**
 * The yardstick of a `py:` kernel that declares `"accumulate": "tf32"` (docs/spec/precision.md#tf32):
 * the TypeScript reference pair run plain (f32 storage, f32 sums) with every operand of its products
 * cut to TF32 (src/precision.ts withAccumulate("tf32"), toward zero as tensor cores do), per sequence, on the same rounded
 * inputs as ref64. The PyTorch reference that serves the other precisions has no TF32 mode.
 */
import type { Precision } from "../../src/precision.ts";
import type { InnerInputs, RuleDecl, State } from "../../src/rules/types.ts";
import { plainRuns, plainYardstickSeq, runPlain } from "../../oracle/plain-reference.ts";
import type { SeqTensors } from "../../oracle/kernel-case.ts";
import { seqCfg, toKernelGrads, type PyCase } from "./cases.ts";

/** Per sequence, the TF32 plain reference in the kernel's terms (as toKernelGrads gives ref64). */
export function tf32Yardstick(decl: RuleDecl, c: PyCase, p: Precision, r64: readonly SeqTensors[]): SeqTensors[] {
  return c.seqs.map((q, n) => {
    const pc = { inputs: q.in64 as unknown as InnerInputs, state: q.st64 as State, dy: q.dy64, dFinal: q.dFinal64 as State };
    const plain = plainYardstickSeq(p.accumulate, r64[n]!, (order) => toKernelGrads(c, n, runPlain(decl, c.frozen, pc, seqCfg(c, n), p, order)), plainRuns(decl));
    return plain;
  });
}
