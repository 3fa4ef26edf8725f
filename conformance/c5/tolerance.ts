/**
 * C5's tolerances and run counts (docs/spec/precision.md#flash, the flash-attention rule):
 * the values the plan attaches to its entries and the comparison applies.
 */
import type { Profile } from "../../harness/check.ts";

export type Runs = Readonly<Record<Profile, number>>;
/** A check's tolerance as the report states it. */
export type CheckTolerance = Readonly<Record<string, unknown>>;

export const RUNS: Runs = { quick: 5, default: 30, deep: 300 };
export const RUNS_E2E: Runs = { quick: 4, default: 10, deep: 100 };
export const RUNS_GPU_BLOCKS: Runs = { quick: 2, default: 8, deep: 60 };
export const RUNS_THREAD_MODE: Runs = { quick: 2, default: 3, deep: 20 };
export const RUNS_CHECKPOINT: Runs = { quick: 3, default: 10, deep: 100 };
export const RUNS_CHUNKS: Runs = { quick: 2, default: 6, deep: 60 };
export const RUNS_ONE: Runs = { quick: 1, default: 1, deep: 1 };

/** Relative floor of the flash-attention bound, per tensor and sequence, for a kernel that sums in f64. */
export const FLOOR_REL = 1e-6;
/**
 * The same for a kernel that sums in f32 (docs/spec/precision.md#floors). The plain f32 reference
 * rounds its sums in f32 but keeps its scalar intermediates (gates, norms, per-token scalars) in
 * f64, so on cancelling sums a correct f32 kernel can be further from ref64 than twice the plain
 * reference: measured on the pure-f32 build (ffi/build.ts cpu-f32) up to 2e-5 of max|ref64|
 * (Moneta's y at q ≈ 2.65, Trellis' dq through the normalised-SiLU guard).
 */
export const FLOOR_REL_F32_ACC = 1e-4;

export function floorRel(accumulate: "f64" | "f32"): number {
  return accumulate === "f32" ? FLOOR_REL_F32_ACC : FLOOR_REL;
}
/** A compared tensor whose |ref64| never exceeds this in any case of a check was never exercised. */
export const EXERCISED = 1e-6;

export const TOLERANCE: CheckTolerance = {
  kind: "flash-attention rule (docs/spec/precision.md#flash)",
  bound: "per tensor and sequence: max|kernel - ref64| <= 2 * max|ref32 - ref64| + floor",
  ref32: "the TypeScript reference run on f32 tensors (same inputs, rounded to the kernel's storage dtype once), summed in the kernel's accumulate dtype; " +
    "for a kernel summing in f32, per element the farthest from ref64 of ten runs (natural order, reversed, eight with random rounding; docs/spec/precision.md#orders)",
  floor: `${FLOOR_REL} * max|ref64| (a kernel summing in f32: ${FLOOR_REL_F32_ACC} * max|ref64|)`,
  floor_reason:
    "on tiny cases (s = 1, d = 1) the f32 reference can be exact, while a kernel that sums in another order (threads, " +
    "FMA on a GPU) is a few f32 roundings (2^-24 relative each) off; 1e-6 relative is ~16 roundings of the largest value",
  vacuity: `a case whose compared references are all below ${EXERCISED} is vacuous; so is a check in which some compared tensor never exceeds it`,
};
export const TOL_BITWISE: CheckTolerance = { kind: "bitwise", reason: "the same kernel and inputs with the thread order reversed must give identical bits" };
export const TOL_WORKSPACE: CheckTolerance = {
  kind: "size query", bound: "workspace_bytes(C = 16) <= workspace_bytes(C = 1) / 8 at d = 64, T = 256 (B = H = 1)",
};
export const TOL_ISOLATION: CheckTolerance = { kind: "process isolation" };
export const TOL_EXACT: CheckTolerance = { kind: "exact" };
export const TOL_CRASH: CheckTolerance = { kind: "crash" };
/** What a child-side check reports when the kernel pair it needs is missing. */
export const TOL_PRESENCE: CheckTolerance = { kind: "presence" };
