/**
 * A native pair judged under every variant it exports (docs/spec/kernel-abi.md#variants): each
 * forward and backward case runs under the library's own choice (`nlk_<rule>_set_variant(-1)`),
 * then under each variant pinned, each judged as the first is. A case fails under the first variant
 * that fails, and the message names it (`variant <name>: ...`). The check's details.configurations
 * name every variant judged, with its cases and its kernel calls' time; the limit
 * (NLC_KERNEL_CONFIGS=first: the library's own choice only) is stated there and in the message, as
 * a py: kernel's configurations are (harness/configurations.ts). A library that exports neither
 * function is judged under its own dispatch only, and its results say nothing of variants.
 */
import type { PairVariants } from "../../../ffi/lib-types.ts";
import type { CaseOutcome, CheckResult } from "../../../harness/check.ts";
import { DEFAULT_CONFIGURATION, type ConfigTally, type Judgement } from "../../../harness/configurations.ts";

/** The kernel time of one case, filled in by the case (native/phase-case.ts). */
export interface KernelTiming {
  kernelMs: number;
}

const named = (o: CaseOutcome, name: string): CaseOutcome =>
  ({ ...o, message: `variant ${name}: ${o.message ?? "failed"}`, details: { ...(o.details ?? {}), variant: name } });

/**
 * One case under the library's own choice (named DEFAULT_CONFIGURATION), then under each variant
 * pinned up to the first that fails; the library's own choice is restored after. `variants`: what
 * the library exports (null: nothing, the case as before; a string: a declaration that cannot be
 * judged, the case's failure).
 */
export function acrossVariants(variants: PairVariants | null | string, tally: ConfigTally, judge: (t: KernelTiming) => CaseOutcome): CaseOutcome {
  const timed = (): Judgement => {
    const t: KernelTiming = { kernelMs: 0 };
    return { outcome: judge(t), kernelMs: t.kernelMs };
  };
  if (variants === null) return judge({ kernelMs: 0 });
  if (typeof variants === "string") return { ok: false, message: variants };
  variants.pin(-1);
  const first = timed();
  tally.add(DEFAULT_CONFIGURATION, first.kernelMs);
  tally.reached(variants.names, 0);
  if (!first.outcome.ok) return first.outcome.vacuous === true ? first.outcome : named(first.outcome, DEFAULT_CONFIGURATION);
  if (tally.limit === "first") return first.outcome;
  try {
    for (const [i, name] of variants.names.entries()) {
      variants.pin(i);
      const j = timed();
      tally.add(name, j.kernelMs);
      if (!j.outcome.ok && j.outcome.vacuous !== true) return named(j.outcome, name);
    }
  } finally {
    variants.pin(-1);
  }
  return first.outcome;
}

/** A finished check with its variants: details.configurations, and the limit in its message when not every variant was judged. */
export function withVariants(r: CheckResult, tally: ConfigTally): CheckResult {
  const judged = tally.details(), note = tally.note();
  if (judged === undefined && note === null) return r;
  return {
    ...r,
    ...(note === null ? {} : { message: [r.message, `(${note})`].filter((x) => x).join(" ") }),
    ...(judged === undefined ? {} : { details: { ...(r.details ?? {}), configurations: judged } }),
  };
}
