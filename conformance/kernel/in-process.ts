/**
 * C5 on an in-process kernel backend (docs/spec/kernel-abi.md#kernel-backends): a backend of the
 * contract (cases/kernel-backend.ts) that answers at once and takes the native batch, its kernels
 * TypeScript in the checking process, so it needs neither a library nor a child process. Per rule
 * of the registry and its frozen read, the forward and backward checks a native library gets
 * (native-plan.ts: the same cases, precision rule, coverage and ids under the backend's slug), each run
 * where it is called; a rule the backend does not declare is skipped with its reason.
 */
import type { KernelBackend } from "../../cases/kernel-backend.ts";
import type { CheckDef, DelegatedCheck, DelegatedResult, DelegateOptions } from "../../harness/check.ts";
import { runCheck } from "../../harness/run.ts";
import { backendPhaseCheck } from "./child-checks.ts";
import type { NativeBatch } from "./native-backend.ts";
import { c5Plan, type RuleEntry } from "./native-plan.ts";

/** An in-process backend: made on first use, once per catalogue. */
export type InProcessFactory = () => KernelBackend<NativeBatch, true>;

type PhaseEntry = RuleEntry & { kind: "forward" | "backward" };

/** What an in-process backend offers: the contract alone (no library entry points, no emulation). */
const OFFERS = ["contract"] as const;

/** One check run here: the definition's cases, then the coverage rule on its result. */
function delegate(e: PhaseEntry, backend: () => KernelBackend<NativeBatch, true>): (opts: DelegateOptions) => DelegatedResult {
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
  return c5Plan(name, slug, OFFERS)
    // what the contract offers is forward and backward: the filter only narrows the type
    .filter((e): e is PhaseEntry => e.kind === "forward" || e.kind === "backward")
    .map((e): DelegatedCheck => ({
      kind: "delegated", id: e.id, class: "C5", subject: e.subject, spec: e.spec, tolerance: e.tolerance,
      needs: { child: `C5 ${name}` }, replayArgs: ["--backend", name], delegate: delegate(e, backend),
    }));
}
