/**
 * One sequence of a kernel case, for either case form (cases/kernel-batch.ts CaseForm): its values
 * rounded once to the kernel's dtypes and held in f64 (what the f64 reference reads), its length
 * and head, and the fields its form adds. The abi form (native and in-process backends) keeps an
 * f32 copy of every tensor (what the kernel and the f32 plain reference receive) and the rule
 * config; the canonical form (py: backends) keeps the values the kernel receives in its own
 * parametrisation (docs/spec/py-backend.md#conventions) beside those the references read.
 */
import type { CaseForm } from "./kernel-batch.ts";
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
