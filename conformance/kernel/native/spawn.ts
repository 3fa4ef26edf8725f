/**
 * Starting the native kind's child process (conformance/kernel/child.ts native) through harness/child-process.ts. Native
 * code never runs in the suite's process: probing builds and loads the backends in a child, and
 * each backend's checks run in a child; a crash, abort or hang of that child turns the check it was
 * running into `error` naming the kernel, the signal or the timeout and the case, and a fresh child
 * runs the checks it had not reached.
 */
import type { Resolved } from "../../../ffi/backends.ts";
import type { CheckResult, Profile } from "../../../harness/check.ts";
import { runBatch, spawnChild, tail, type ChildSpec, type ChildTimeout } from "../../../harness/child-process.ts";
import { ROOT } from "../../../paths.ts";
import { parseProbeOutput, type ChildRequest } from "./protocol.ts";
import { environment, type Environment } from "../../../environment.ts";
import type { ConfigLimit } from "../../../harness/configurations.ts";
import { childCommand } from "../child-kind.ts";

/**
 * The native child (child-kind.ts childCommand): NLC_KERNEL_PRELOAD becomes its LD_PRELOAD (e.g.
 * the TSan runtime); its progress (kernel builds) shows on this process's stderr while it runs.
 */
function child(args: readonly string[], limit?: ConfigLimit) {
  const preload = environment().NLC_KERNEL_PRELOAD;
  return { ...childCommand("native", args, limit, preload ? { LD_PRELOAD: preload } : {}), cwd: ROOT, progressFd: true };
}

/**
 * What one check of a batch may take, by profile: the limit is there to end a hung kernel, and a
 * slow CPU kernel on a loaded machine is not a fault. The regime profile's checks run T up to 1040,
 * d up to 256 and B·H ≥ 32, and an f32-summing build's plain reference runs ten times: measured at
 * up to 600 s for the 83 checks of cpu-f32 on a shared two-core machine, which the default
 * allowance (309 s for the batch) ended as a false `error` (docs/spec/kernel-abi.md#isolation).
 */
const PER_CHECK_MS: Readonly<Record<Profile, number>> = { quick: 3_000, default: 3_000, deep: 10_000, regime: 20_000 };

/** A batch's time limit: the caller's own (`ms`), else NLC_KERNEL_TIMEOUT seconds, else 60 s and the profile's allowance per check. */
export function batchTimeout(profile: Profile, ms?: number, env: Environment = environment()): ChildTimeout {
  if (ms !== undefined) return { baseMs: ms, perCheckMs: 0 };
  const set = Number(env.NLC_KERNEL_TIMEOUT);
  if (Number.isFinite(set) && set > 0) return { baseMs: set * 1000, perCheckMs: 0 };
  return { baseMs: 60_000, perCheckMs: PER_CHECK_MS[profile] };
}

/**
 * Runs a batch in children (a fresh one after each death); a check a child died in is `error` with
 * the cause. `limit`: the configurations (variants) its checks judge; unset, the child's own
 * environment says.
 */
export function runChild(req: ChildRequest, limit?: ConfigLimit): Map<string, CheckResult> {
  const spec: ChildSpec = {
    ...child([], limit),
    who: `the child process running C5 on ${req.backend}`,
    timeout: batchTimeout(req.profile, req.timeoutMs),
    // a caller's own limit (the hang-isolation check's) is no setting of the user's
    timeoutSetting: req.timeoutMs !== undefined ? undefined : environment().NLC_KERNEL_TIMEOUT === undefined
      ? `NLC_KERNEL_TIMEOUT (unset: 60 s + ${PER_CHECK_MS[req.profile] / 1000} s a check at --profile ${req.profile})`
      : `NLC_KERNEL_TIMEOUT=${environment().NLC_KERNEL_TIMEOUT} s`,
    replayArgs: ["--backend", req.backend],
  };
  return runBatch(spec, req);
}

let probed: Resolved[] | undefined;

/** The probe results so far: undefined until some C5 check needed a backend. */
export function probedBackends(): Resolved[] | undefined {
  return probed;
}

/** Takes the probe of the thread that started this one (a worker of the CLI): one probe per run. */
export function adoptProbe(results: Resolved[] | undefined): void {
  if (results !== undefined) probed ??= results;
}

/** Builds and loads the run's native backends (`names`) in a child process (never in this one), once. */
export function probeBackends(names: readonly string[]): Resolved[] {
  if (probed !== undefined) return probed;
  // Building is incremental, but a fresh checkout compiles every kernel (a minute with nvcc): say so.
  const t0 = performance.now();
  console.error(`kernel backends: building (if needed) and loading ${names.join(", ")} ...`);
  const proc = spawnChild(child(["--probe", "--backends", names.join(",")]), 900_000);
  const report = parseProbeOutput(proc.stdout);
  if (proc.death === undefined && report !== undefined) {
    probed = report;
  } else {
    const reason = `probing the kernel backends failed (${proc.death ?? "no report"}): ${tail(proc.stderr + proc.stdout)}`;
    probed = names.map((name) => ({ info: { name, available: false, reason }, problem: "broken" as const }));
  }
  console.error(`kernel backends: ready in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  return probed;
}
