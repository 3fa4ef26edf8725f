/**
 * C5's tolerances and run counts: the values the plan attaches to its entries (the judge itself,
 * the precision rule of docs/spec/precision.md#flash, is oracle/kernel-judge.ts).
 */
import type { Runs } from "../../cases/kernel-batch.ts";
import { KERNEL_TOLERANCE } from "../../oracle/kernel-judge.ts";

/** A check's tolerance as the report states it. */
export type CheckTolerance = Readonly<Record<string, unknown>>;

export const RUNS_E2E: Runs = { quick: 4, default: 10, deep: 100 };
export const RUNS_GPU_BLOCKS: Runs = { quick: 2, default: 8, deep: 60 };
export const RUNS_THREAD_MODE: Runs = { quick: 2, default: 3, deep: 20 };
export const RUNS_CHECKPOINT: Runs = { quick: 3, default: 10, deep: 100 };
export const RUNS_CHUNKS: Runs = { quick: 2, default: 6, deep: 60 };
export const RUNS_ONE: Runs = { quick: 1, default: 1, deep: 1 };

/** The judge's tolerance (oracle/kernel-judge.ts), as the flash-attention checks report it. */
export const TOLERANCE: CheckTolerance = KERNEL_TOLERANCE;
export const TOL_BITWISE: CheckTolerance = { kind: "bitwise", reason: "the same kernel and inputs with the thread order reversed must give identical bits" };
export const TOL_WORKSPACE: CheckTolerance = {
  kind: "size query", bound: "workspace_bytes(C = 16) <= workspace_bytes(C = 1) / 8 at d = 64, T = 256 (B = H = 1)",
};
export const TOL_ISOLATION: CheckTolerance = { kind: "process isolation" };
export const TOL_EXACT: CheckTolerance = { kind: "exact" };
export const TOL_CRASH: CheckTolerance = { kind: "crash" };
