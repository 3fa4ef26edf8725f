/**
 * The bias test (docs/spec/precision.md#bias): a kernel whose error is a small systematic scale
 * (a gradient off by 1%) can stay inside the flash-attention bound, because the bound is sized by
 * the plain reference's rounding noise. Regressing the error on the truth finds it:
 *
 *   slope = ⟨r, k − r⟩ / ⟨r, r⟩            r = ref64, k = kernel, over every element of a tensor
 *   σ     = sqrt( Σ (k − r − slope·r)² / (n − 1) / ⟨r, r⟩ )     its standard error
 *
 * Rounding noise is (nearly) uncorrelated with r, so a correct kernel's slope stays within a few σ;
 * a scale error ε gives slope ≈ ε however small the noise. The verdict fails only when |slope|
 * exceeds all three of
 *   k·σ                      significant, not chance;
 *   2·‖plain − r‖ / ‖r‖      more than twice what the plain reference's error could produce
 *                            (|⟨r, e⟩| / ⟨r, r⟩ <= ‖e‖/‖r‖ by Cauchy–Schwarz): the flash rule's
 *                            "twice the plain reference", in the norm the slope lives in. On small
 *                            tensors with cancelling sums a few correlated roundings can tilt the
 *                            slope; this term is what keeps those from being called a bias;
 *   the dtype's floor        large enough to matter.
 */
import type { Precision, StorageDType } from "../src/precision.ts";
import { BIAS } from "./precision-table.ts";

export interface BiasStat {
  /** Least-squares slope of (kernel − ref64) on ref64. */
  readonly slope: number;
  /** Its standard error from the residuals. */
  readonly sigma: number;
  /** Elements regressed. */
  readonly n: number;
}

export interface BiasVerdict extends BiasStat {
  readonly ok: boolean;
  /** The threshold |slope| had to stay under: max(k·σ, plainTerm, floor). */
  readonly threshold: number;
  readonly k: number;
  /** 2·‖plain − ref64‖ / ‖ref64‖. */
  readonly plainTerm: number;
  readonly floor: number;
}

/** Significance multiple k (docs/spec/precision.md#bias-calibration for the measured distribution). */
export const BIAS_K = BIAS.k.value;

/**
 * Per storage dtype, the smallest slope that counts as a bias (docs/spec/precision.md#bias-calibration).
 * Over 1000 generated cases per rule variant, a correct kernel (the plain reference summed in the
 * reverse order) showed |slope| up to 2.5e-4 in f32, 3.73e-3 in bf16 and 4.6e-4 in f16 (outside
 * f16 overflow, which the plain-reference term covers): the floors sit above those, and a planted
 * 1% scale minus the largest correct slope stays above them.
 */
export const BIAS_FLOOR: Readonly<Record<StorageDType, number>> = BIAS.floor.value;

function norm(a: ArrayLike<number>, b?: ArrayLike<number>): number {
  let s = 0;
  for (let i = 0; i < a.length; i++) {
    const x = b === undefined ? a[i]! : a[i]! - b[i]!;
    s += x * x;
  }
  return Math.sqrt(s);
}

export function biasStat(kernel: ArrayLike<number>, ref64: ArrayLike<number>): BiasStat {
  const n = Math.min(kernel.length, ref64.length);
  let rr = 0, re = 0;
  for (let i = 0; i < n; i++) {
    const r = ref64[i]!;
    rr += r * r;
    re += r * (kernel[i]! - r);
  }
  if (!(rr > 0) || n < 2) return { slope: 0, sigma: Infinity, n };
  const slope = re / rr;
  let ss = 0;
  for (let i = 0; i < n; i++) {
    const r = ref64[i]!, res = kernel[i]! - r - slope * r;
    ss += res * res;
  }
  return { slope, sigma: Math.sqrt(ss / (n - 1) / rr), n };
}

/** The verdict for one tensor (plain: the plain-precision reference's values for it). */
/**
 * The bias floor of a precision: per storage dtype, and for a kernel whose products are TF32 its own
 * (docs/spec/precision.md#tf32).
 */
export function biasFloor(p: StorageDType | Pick<Precision, "storage" | "accumulate">): number {
  if (typeof p === "string") return BIAS_FLOOR[p];
  return p.accumulate === "tf32" ? BIAS.floorTF32.value : BIAS_FLOOR[p.storage];
}

/**
 * The verdict for one tensor (plain: the plain-precision reference's values for it; p: the storage
 * dtype, or the whole precision). For TF32 products a tensor of fewer than BIAS.minElementsTF32
 * elements is not judged (threshold infinite): a few TF32 roundings are a systematic scale over so
 * few elements (docs/spec/precision.md#tf32).
 */
export function biasVerdict(kernel: ArrayLike<number>, ref64: ArrayLike<number>, plain: ArrayLike<number>, p: StorageDType | Pick<Precision, "storage" | "accumulate">, k = BIAS_K): BiasVerdict {
  const st = biasStat(kernel, ref64);
  const floor = typeof p !== "string" && p.accumulate === "tf32" && st.n < BIAS.minElementsTF32.value ? Infinity : biasFloor(p);
  const rn = norm(ref64);
  const plainTerm = rn > 0 ? BIAS.plainFactor.value * norm(plain, ref64) / rn : Infinity;
  const threshold = Math.max(k * st.sigma, plainTerm, floor);
  // NaN anywhere in the kernel's values makes the slope NaN: that is a failure, not a pass
  const ok = !Number.isNaN(st.slope) && Math.abs(st.slope) <= threshold;
  return { ...st, ok, threshold, k, plainTerm, floor };
}
