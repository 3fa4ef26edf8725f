/**
 * One sequence of a kernel case, for either case form (cases/kernel-batch.ts CaseForm): its values
 * rounded once to the kernel's dtypes and held in f64 (what the f64 reference reads), its length
 * and head, and the fields its form adds. The abi form (native and in-process backends) keeps an
 * f32 copy of every tensor (what the kernel and the f32 plain reference receive) and the rule
 * config; the canonical form (py: backends) keeps the values the kernel receives in its own
 * parametrisation (docs/spec/py-backend.md#conventions) beside those the references read. Both
 * forms build their sequences alike: the same rule case specs (seqSpecs), each one's values from
 * its rule case in f64 (cases/inner-case.ts), which the form then rounds and lays out as its own.
 */
import type { CaseForm, SeqExtra } from "./kernel-batch.ts";
import type { RuleCaseSpec } from "./rule-case.ts";
import type { InnerInputs, RuleConfig, State } from "../src/rules/types.ts";
import type { Tensor } from "../src/tensor.ts";

/** The fields each form adds to a sequence. */
interface FormFields {
  abi: {
    cfg: RuleConfig;
    in64: InnerInputs;
    in32: InnerInputs;
    st32: State;
    dy32: Tensor;
    dFinal32: State;
  };
  canonical: {
    /** What the kernel receives, in its own parametrisation (`in64` is what the references read). */
    kin64: Record<string, Tensor>;
  };
}

/** Sequence n = b·H + h of a case (a packed batch: n = i·H + h), in form F. */
export type KernelSeq<F extends CaseForm = CaseForm> = {
  /** Its tokens (a packed batch's sequences differ; else the case's T). */
  T: number;
  /** Its head h: a softplus gate form's per-head parameters are h's. */
  h: number;
  /** The inputs the references read, by name. */
  in64: Record<string, Tensor>;
  st64: Record<string, Tensor>;
  dy64: Tensor;
  /** d(final state); empty for a frozen read of the canonical form (no final state). */
  dFinal64: Record<string, Tensor>;
} & FormFields[F];

/**
 * The rule case specs of a case's `count` sequences, n = b·H + h (a packed batch: n = i·H + h):
 * sequence 0 is `base`, sequence n > 0 the same with extra n − 1's seed, gate levels and initial
 * state (cases/kernel-batch.ts SeqExtra); `lengths`: each sequence's own length (a packed batch),
 * else every sequence has base's. Either form takes each one's values from its rule case
 * (cases/inner-case.ts innerCase) and rounds and lays them out as its own.
 */
export function seqSpecs(base: RuleCaseSpec, extra: readonly SeqExtra[], count: number, lengths?: readonly number[]): RuleCaseSpec[] {
  const specs = [base, ...extra.slice(0, count - 1).map((e) => ({ ...base, ...e }))];
  return lengths === undefined ? specs : specs.map((s, n) => ({ ...s, seq_len: lengths[n]! }));
}
