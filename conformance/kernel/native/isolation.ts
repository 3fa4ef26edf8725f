/**
 * Crash, abort and hang isolation (cuda/README.md, crash isolation), run by the parent: a child on
 * cpu-emu runs a passing check, the planted fault of the cpu-test library, and another check. The
 * fault must become an `error` naming the signal or the timeout; the check before it must still
 * report, and the one after it must run in a fresh child and pass.
 */
import { join } from "node:path";
import type { CaseOutcome, Profile } from "../../../harness/check.ts";
import { ROOT } from "../../../paths.ts";
import { variantKey } from "../../../src/rules/level.ts";
import { nativePlanBackend, plantedEntry } from "./plan.ts";
import { kernelPlan, partOf, type Fault } from "../plan.ts";
import { tail } from "../../../harness/child-process.ts";
import { runChild } from "./spawn.ts";

const BEFORE = `C5/cpu-emu/${variantKey("hebbian", true)}/forward`;
const AFTER = `C5/cpu-emu/${variantKey("delta", true)}/forward`;
/**
 * The hang's time limit, from the start of the planted check in the child (harness/call-watchdog.ts),
 * so that the child's start-up on a loaded machine does not count; the batch's own limit stays
 * as the last resort. The build happens first, so that it cannot expire during a build.
 */
const HANG_TIMEOUT_MS = 4000;

const EXPECTED: Record<Fault, RegExp> = { segv: /SIGSEGV/, abort: /SIGABRT/, hang: /timed out/ };

export function crashIsolation(fault: Fault, profile: Profile): CaseOutcome {
  const plantedPart = plantedEntry("cpu-emu", fault), planted = plantedPart.id;
  // the checks around the planted one, as the plan gives them
  const plan = new Map(kernelPlan(nativePlanBackend("cpu-emu")).map((e) => [e.id, e]));
  const checkOf = (id: string) => ({ id, part: partOf(plan.get(id)!) });
  const hang = fault === "hang";
  const build = Bun.spawnSync({ cmd: [process.execPath, join(ROOT, "ffi", "build.ts"), "cpu", "cpu-test"], cwd: ROOT, stdout: "pipe", stderr: "pipe" });
  if (build.exitCode !== 0) return { ok: false, message: `building the cpu-emu test library failed: ${tail(build.stderr.toString())}` };
  const out = runChild({
    backend: "cpu-emu", profile: profile === "deep" ? "default" : "quick", runSeed: 1,
    checks: hang ? [{ id: planted, part: plantedPart }] : [checkOf(BEFORE), { id: planted, part: plantedPart }, checkOf(AFTER)],
    callTimeoutMs: hang ? HANG_TIMEOUT_MS : undefined,
  });
  const p = out.get(planted);
  const want = EXPECTED[fault];
  if (p === undefined || p.status !== "error" || !want.test(p.message ?? "") || !/during this check/.test(p.message ?? "")) {
    return { ok: false, message: `the planted fault should be an 'error' naming ${want.source}; got ${p?.status}: ${p?.message}` };
  }
  if (!hang) {
    const b = out.get(BEFORE), a = out.get(AFTER);
    if (b?.status !== "pass") return { ok: false, message: `the check before the crash should still report: ${b?.status} ${b?.message ?? ""}` };
    if (a?.status !== "pass") return { ok: false, message: `the check after the crash should run in a fresh child and pass, got ${a?.status} ${a?.message ?? ""}` };
  }
  return { ok: true, message: p.message };
}
