/**
 * One sequence of a kernel case, for either case form (cases/kernel-batch.ts CaseForm): its values
 * rounded once to the kernel's dtypes and held in f64 (what the f64 reference reads), its length
 * and head, and the fields its form adds. The abi form (native and in-process backends) keeps an
 * f32 copy of every tensor (what the kernel and the f32 plain reference receive) and the rule
 * config; the canonical form (py: backends) keeps the values the kernel receives in its own
 * parametrisation (docs/spec/py-backend.md#conventions) beside those the references read. Both
 * forms build their sequences with one function (kernelSequence): the same rule case specs
 * (seqSpecs), each one's values from its rule case in f64 (cases/inner-case.ts), rounded by the
 * form's route.
 */
import type { CaseForm, SeqExtra } from "./kernel-batch.ts";
import type { RuleCaseSpec } from "./rule-case.ts";
import type { InnerCase } from "./inner-case.ts";
import type { InnerInputs, RuleConfig, State } from "../src/rules/types.ts";
import { Tensor, cast } from "../src/tensor.ts";
import { roundedCopy, roundTo, type Precision, type StorageDType } from "../src/precision.ts";

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

/**
 * The two routes a case's values take to the kernel's dtype: `through-f32` — to f32, then to a
 * narrower dtype, the f32 copy kept (the native ABI's f32 tensors: a double rounding for bf16 and
 * f16); `from-f64` — once, from the f64 value (a py: kernel's request). Each form has its route: the
 * abi form the first, the canonical form the second.
 */
const ROUTE: Readonly<Record<CaseForm, "through-f32" | "from-f64">> = { abi: "through-f32", canonical: "from-f64" };

/** `t` rounded to `dtype` by the route: held in f64, and (through f32) the f32 copy. */
function roundBy(route: "through-f32" | "from-f64", dtype: StorageDType, t: Tensor): { t64: Tensor; t32?: Tensor } {
  if (route === "from-f64") {
    const t64 = new Tensor("f64", [...t.shape]);
    t64.data.set(roundedCopy(dtype, t.data));
    return { t64 };
  }
  const t32 = cast(t, "f32");
  if (dtype !== "f32") for (let i = 0; i < t32.data.length; i++) t32.data[i] = roundTo(dtype, t32.data[i]!);
  return { t32, t64: cast(t32, "f64") };
}

/** What a form sends of a sequence's rule case besides its state and dy. */
export interface SequenceValues {
  /** The inputs sent, by name, as the kernel takes them (its parametrisation), before rounding. */
  readonly inputs: Readonly<Record<string, Tensor>>;
  /** An input's own dtype (default: the storage dtype). */
  readonly dtypeOf?: (name: string) => StorageDType;
  /** How the references read a rounded input (default: as it is). */
  readonly toReference?: (name: string, rounded: Tensor) => Tensor;
  /** d(final state), before rounding (none for a frozen read). */
  readonly dFinal: Readonly<Record<string, Tensor>>;
}

/**
 * One sequence of a case, for either form: rule case `c`'s values (head `h`), what the form sends
 * (`v`), each rounded once to the kernel's dtypes by the form's route (inputs, dy: storage; state,
 * d(final state): state) and held in f64, the references' inputs beside the kernel's.
 */
export function kernelSequence<F extends CaseForm>(form: F, c: InnerCase, h: number, p: Pick<Precision, "storage" | "state">, v: SequenceValues): KernelSeq<F> {
  const route = ROUTE[form];
  const each = (rec: Readonly<Record<string, Tensor>>, dtype: (n: string) => StorageDType) => {
    const r64: Record<string, Tensor> = {}, r32: Record<string, Tensor> = {};
    for (const [n, t] of Object.entries(rec)) {
      const r = roundBy(route, dtype(n), t);
      r64[n] = r.t64;
      if (r.t32 !== undefined) r32[n] = r.t32;
    }
    return { r64, r32 };
  };
  const inp = each(v.inputs, (n) => v.dtypeOf?.(n) ?? p.storage), st = each(c.state, () => p.state), dF = each(v.dFinal, () => p.state);
  const dy = roundBy(route, p.storage, c.dy);
  const in64 = v.toReference === undefined ? inp.r64 : Object.fromEntries(Object.entries(inp.r64).map(([n, t]) => [n, v.toReference!(n, t)]));
  const base = { T: c.cfg.seq_len, h, in64, st64: st.r64, dy64: dy.t64, dFinal64: dF.r64 };
  const own = form === "abi"
    ? { cfg: c.cfg, in32: inp.r32 as unknown as InnerInputs, st32: st.r32, dy32: dy.t32!, dFinal32: dF.r32 }
    : { kin64: inp.r64 };
  return { ...base, ...own } as unknown as KernelSeq<F>;
}
