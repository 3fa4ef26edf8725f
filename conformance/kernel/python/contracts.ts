/**
 * The contract checks of a py: kernel (docs/spec/py-backend.md#contracts): a kernel refuses what it
 * cannot do. A call it cannot compute must raise, not return numbers: a result that nobody judges
 * for that call reaches a model as if it were right.
 *
 *   C5/py-<name>/<rule>/contract   a kernel that takes packed batches (`varlen`) called with B = 2
 *                                  and cu_seqlens must raise
 *
 * Checked for a kernel that declares `varlen`; for any other it is a skip saying why.
 */
import type { Precision } from "../../../src/precision.ts";
import type { RuleDecl } from "../../../src/rules/types.ts";
import { packedLabel } from "../../../cases/kernel-regimes.ts";
import { buildPyCase, pyPackedExample } from "./canonical-case.ts";
import type { Conventions } from "./conventions.ts";
import type { KernelSession } from "./session.ts";

/** The contract probe's name on the wire (python/nlc_torch/kernel_calls.py CONTRACT_BATCHED_CU_SEQLENS). */
export const CONTRACT_BATCHED_CU_SEQLENS = "batch_with_cu_seqlens";

/** The batch size the probe sends with cu_seqlens. */
export const CONTRACT_B = 2;

export interface ContractVerdict {
  readonly status: "pass" | "fail" | "skip";
  readonly message: string;
  readonly details: Readonly<Record<string, unknown>>;
}

/**
 * B > 1 with cu_seqlens: the declared packed case (lengths [C − 1, 1, C + 1], H = 2, d = 4) with a
 * second batch row (zeros; the values do not matter, the call must not return), its offsets and one
 * initial state per packed sequence, as a kernel that ignored B would take them.
 */
export async function batchedCuSeqlens(s: KernelSession, decl: RuleDecl, key: string, frozen: boolean, p: Precision, conv: Conventions,
  C: number, who: string): Promise<ContractVerdict> {
  if ((s.info.varlen ?? null) === null) {
    return { status: "skip", message: `${who} declares no nlc['varlen']: it takes no packed batches, so there is no cu_seqlens contract to check (docs/spec/py-backend.md#contracts)`, details: {} };
  }
  const c = buildPyCase(decl, pyPackedExample(decl, C), frozen, p, conv);
  const lengths = c.packed!.lengths;
  const sent = `B = ${CONTRACT_B} with ${s.info.varlen} = [${c.packed!.cu.join(", ")}] (${packedLabel(lengths)}, T = ${c.T}, H = ${c.H}, d = ${c.cfg.d})`;
  const r = await s.contract({ ...c, B: CONTRACT_B }, key, CONTRACT_BATCHED_CU_SEQLENS);
  const details = { contract: "B > 1 with cu_seqlens must raise", sent: { B: CONTRACT_B, cu_seqlens: c.packed!.cu, T: c.T, H: c.H, d: c.cfg.d } };
  if (r.refused !== null) return { status: "pass", message: `refused ${sent}: ${r.refused}`, details: { ...details, refused: r.refused } };
  return {
    status: "fail",
    message: `${who} accepted ${sent} and returned ${r.returned ?? "a result"} instead of raising: packed sequences travel along T with B = 1, ` +
      `so a kernel given B > 1 with ${s.info.varlen} must refuse the call, not compute it (docs/spec/py-backend.md#contracts)`,
    details: { ...details, returned: r.returned ?? null },
  };
}
