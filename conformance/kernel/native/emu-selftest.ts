/**
 * Self-tests of the emulation (cuda/README.md, emulation model and race check), run in the child:
 * the race check must catch the cpu-test library's planted race, a divergent or abandoned
 * __syncthreads() must be an error status (never a hang), and thread mode must give fiber mode's
 * bits. The planted fault (segv, abort, hang) is the kernel the parent's isolation checks request.
 */
import type { KernelLib } from "../../../ffi/lib-types.ts";
import type { CaseOutcome } from "../../../harness/check.ts";
import { ruleByKey } from "../../../src/rules/index.ts";
import type { AbiCaseSpec } from "../../../cases/kernel-batch.ts";
import { compareRuns, runAllKernels } from "./bitwise.ts";
import { requireEmu, requirePair, requireTestSymbol } from "./kernel-lib.ts";
import { FAULTS, type Fault } from "../plan.ts";

/** The rule whose kernels thread mode runs. */
export const THREAD_MODE_RULE = "delta";

export function raceDetector(t: KernelLib): CaseOutcome {
  const emu = requireEmu(t), race = requireTestSymbol(t, "nlk_test_race");
  const n = 8;
  const a = new Float32Array(n), b = new Float32Array(n);
  try {
    emu.setOrder(false);
    const s1 = race(n, a);
    emu.setOrder(true);
    const s2 = race(n, b);
    if (s1 !== 0 || s2 !== 0) return { ok: false, message: `nlk_test_race returned ${s1}, ${s2}` };
  } finally {
    emu.setOrder(false);
  }
  const r = compareRuns([{ fn: "nlk_test_race", name: "out", data: a }], [{ fn: "nlk_test_race", name: "out", data: b }], "between thread orders");
  return r.ok ? { ok: false, message: "the planted race (a missing __syncthreads) gave identical bits in both thread orders: the race check is blind" }
    : { ok: true, message: r.message };
}

export function syncMisuse(t: KernelLib): CaseOutcome {
  const emu = requireEmu(t), div = requireTestSymbol(t, "nlk_test_divergent_sync");
  for (const threads of [false, true]) {
    emu.setMode(threads);
    try {
      const mode = threads ? "thread mode" : "fiber mode";
      const s0 = div(0);
      const d0 = emu.errorDetail();
      if (s0 !== -20) return { ok: false, message: `${mode}: divergent __syncthreads() returned ${s0}, expected -20 (NLK_ERR_EMU_SYNC_DIVERGENT)` };
      if (!/test_kernels\.cu:\d+.*test_kernels\.cu:\d+/.test(d0)) return { ok: false, message: `${mode}: the detail does not name both call sites: '${d0}'` };
      const s1 = div(1);
      if (s1 !== -21) return { ok: false, message: `${mode}: __syncthreads() after a return gave ${s1}, expected -21 (NLK_ERR_EMU_SYNC_EXITED)` };
    } finally {
      emu.setMode(false);
    }
  }
  return { ok: true };
}

export function threadMode(lib: KernelLib, k: AbiCaseSpec): CaseOutcome {
  const decl = ruleByKey(THREAD_MODE_RULE);
  requirePair(lib, decl.key);
  const emu = requireEmu(lib);
  const fib = runAllKernels(decl, false, lib, k);
  emu.setMode(true);
  try {
    return compareRuns(fib, runAllKernels(decl, false, lib, k), "between fiber mode and thread mode");
  } finally {
    emu.setMode(false);
  }
}

/** Runs nlk_test_crash: returning at all is the failure (the fault should have taken the process down). */
export function plantedFault(t: KernelLib, fault: Fault): CaseOutcome {
  const st = requireTestSymbol(t, "nlk_test_crash")(FAULTS.indexOf(fault));
  return { ok: false, message: `the planted fault did not take the process down (status ${st})` };
}
