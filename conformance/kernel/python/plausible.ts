/**
 * What a failure far outside any plausible range is likely to be (docs/spec/py-backend.md#implausible):
 * rounding, even in bf16, moves a value by a fraction of its magnitude, and a slip in a kernel's
 * arithmetic (a dropped term, a wrong gate) by about its magnitude; an error a thousand times the
 * largest reference value means the kernel computed on data it misread.
 */
import type { CaseOutcome } from "../../../harness/check.ts";
import type { Compared } from "../../../oracle/kernel-judge.ts";
import { PY } from "../../../oracle/precision-table.ts";

/** An error this many times the tensor's largest |ref64| (at least 1) is beyond any plausible range. */
export const IMPLAUSIBLE = PY.implausible.value;

/** The largest max|kernel − ref64| / max(max|ref64|, 1) over the items (finite values only), and the tensor. */
export function farthest(items: readonly Compared[]): { ratio: number; name: string } | null {
  let best: { ratio: number; name: string } | null = null;
  for (const it of items) {
    const k = it.kernel;
    if (k === undefined || k.length !== it.ref64.length) continue;
    let mag = 0, err = 0;
    for (let i = 0; i < k.length; i++) {
      mag = Math.max(mag, Math.abs(it.ref64[i]!));
      const e = Math.abs(k[i]! - it.ref64[i]!);
      if (Number.isFinite(e)) err = Math.max(err, e);
    }
    const ratio = err / Math.max(mag, 1);
    if (best === null || ratio > best.ratio) best = { ratio, name: it.name };
  }
  return best;
}

/** A failing outcome's message with what is likely wrong, when its error is beyond any plausible range. */
export function withPlausibility(o: CaseOutcome, items: readonly Compared[], interpreted: boolean): CaseOutcome {
  if (o.ok || o.vacuous === true) return o;
  const f = farthest(items);
  if (f === null || !(f.ratio > IMPLAUSIBLE)) return o;
  const why = interpreted
    ? "this kernel ran in Triton's interpreter on a CPU: an operation the interpreter computes on raw bit patterns " +
      "(docs/spec/py-backend.md#triton-cpu) or a read of memory the kernel does not own"
    : "a dtype or layout other than the declared one, a read of memory the kernel does not own, or an input taken for another";
  return {
    ...o,
    message: `${o.message ?? "failed"} — far outside any plausible range (${f.name} is off by ${f.ratio.toExponential(1)} times ` +
      `its largest reference value, where rounding moves a fraction of it and an arithmetic slip about 1): likely ${why}`,
    details: { ...(o.details ?? {}), implausible: { tensor: f.name, error_over_magnitude: Number(f.ratio.toPrecision(3)) } },
  };
}
