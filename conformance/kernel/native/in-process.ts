/**
 * C5 on an in-process kernel backend (docs/spec/kernel-abi.md#kernel-backends): a backend of the
 * contract (cases/kernel-backend.ts) that answers at once and takes the native batch, its kernels
 * TypeScript in the checking process, so it needs neither a library nor a child process. What the
 * in-process kind supplies to the one catalogue (checks.ts): the plan is told it offers the contract
 * alone and takes the native style (native/plan.ts: the same cases, precision rule, coverage and
 * ids under the backend's slug), so its checks are forward and backward per rule of the registry
 * and its frozen read, each run where it is called; a rule the backend does not declare is skipped
 * with its reason.
 */
import type { KernelBackend } from "../../../cases/kernel-backend.ts";
import type { CheckDef, DelegatedResult, DelegateOptions } from "../../../harness/check.ts";
import { runCheck } from "../../../harness/run.ts";
import { kernelChecks, type KernelKind } from "../checks.ts";
import { backendPhaseCheck } from "./definitions.ts";
import type { NativeBatch } from "./backend.ts";
import { NATIVE_STYLE } from "./plan.ts";
import type { ChildEntry, RuleEntry } from "../plan.ts";

/** An in-process backend: made on first use, once per catalogue. */
export type InProcessFactory = () => KernelBackend<NativeBatch, true>;

type PhaseEntry = RuleEntry & { kind: "forward" | "backward" };
const isPhase = (e: ChildEntry): e is PhaseEntry => e.kind === "forward" || e.kind === "backward";

/** One check run here: the definition's cases, then the coverage rule on its result. */
function delegate(e: ChildEntry, backend: () => KernelBackend<NativeBatch, true>): (opts: DelegateOptions) => DelegatedResult {
  // what the contract offers is forward and backward: the plan generates no other check for it
  if (!isPhase(e)) throw new Error(`${e.id}: an in-process backend runs forward and backward only`);
  return (opts) => {
    const { def, after } = backendPhaseCheck(e, backend(), opts.profile);
    const r0 = opts.replayPath !== undefined
      ? runCheck(def, { seed: 0, profile: opts.profile, replay: { seed: opts.seed, path: opts.replayPath, ...(opts.replayDump !== undefined ? { dump: opts.replayDump } : {}) } })
      : runCheck(def, { seed: opts.runSeed, profile: opts.profile });
    const r = after === undefined ? r0 : after(r0);
    return {
      status: r.status, runs: r.runs, seed: r.seed, path: r.path, ms: r.ms,
      ...(r.worst !== undefined ? { worst: r.worst } : {}), ...(r.message !== undefined ? { message: r.message } : {}),
      ...(r.details !== undefined ? { details: r.details } : {}),
    };
  };
}

/**
 * The C5 forward and backward checks of an in-process backend named `name` (as --backend gives it),
 * with ids C5/<slug>/<rule>[.frozen]/forward|backward. They form one batch of their own (one
 * worker thread under the parallel runner), and their replay names the backend.
 */
export function inProcessKernelChecks(name: string, slug: string, make: InProcessFactory): CheckDef[] {
  let made: KernelBackend<NativeBatch, true> | undefined;
  const backend = () => (made ??= make());
  const kind: KernelKind = {
    plan: () => ({ name, slug, offers: ["contract"], style: NATIVE_STYLE }),
    runs: { here: (_, e) => delegate(e, backend) },
    needs: () => ({ child: `C5 ${name}` }),
    replayArgs: () => ["--backend", name],
  };
  return kernelChecks(kind, [name]);
}
