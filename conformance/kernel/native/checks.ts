/**
 * C5 on native libraries (docs/spec/conformance.md#c5; the precision rule of docs/spec/precision.md#flash):
 * what the native kind supplies to the one catalogue (checks.ts). Each backend's checks are the
 * plan's (plan.ts, with native/plan.ts's style) and run in a child process (spawn.ts, child.ts native;
 * harness/child-process.ts), after the backends are built and probed in a child; an unavailable
 * backend's checks are skipped, a broken one's are errors, without running. The checks of the
 * machinery itself (the ABI header, crash isolation: plan.ts parentPlan) run in this process.
 */
import type { CheckDef, DelegatedResult } from "../../../harness/check.ts";
import type { BackendInfo } from "../../../harness/report.ts";
import type { ConfigLimit } from "../../../harness/configurations.ts";
import { kernelChecks, type KernelKind } from "../checks.ts";
import { abiHeaderCheck } from "./header.ts";
import { crashIsolation } from "./isolation.ts";
import { nativePlanBackend } from "./plan.ts";
import { parentPlan, type IsolationEntry } from "../plan.ts";
import { probeBackends, probedBackends, runChild } from "./spawn.ts";

/**
 * The run's native kernel backends (`names`) for the report (ref is the catalogue's own). They are
 * probed only when a C5 check ran; otherwise they are listed as not probed, so a run filtered to
 * other classes never builds kernels.
 */
export function kernelBackends(names: readonly string[]): BackendInfo[] {
  const probed = probedBackends();
  if (probed !== undefined) return probed.map((p) => p.info);
  return names.map((name) => ({ name, available: false, reason: "not probed: no C5 check ran in this run" }));
}

type Probing = ReturnType<typeof probing>;

/** How the checks of the run's native backends (`names`) reach them: the one probe of them all, and its verdicts. */
function probing(names: readonly string[]) {
  const probe = () => probeBackends(names);
  const probedAs = (backend: string) => {
    const p = probe().find((x) => x.info.name === backend);
    if (p === undefined) throw new Error(`backend ${backend} was not probed`);
    return p;
  };
  /** Skip or error without running when the backend is unavailable or broken (probed once, on first use); null when usable. */
  const verdict = (backend: string, seed: number): DelegatedResult | null => {
    const p = probedAs(backend);
    if (p.problem === "unavailable") return { status: "skip", runs: 0, seed, path: "", message: `backend ${backend} unavailable: ${p.info.reason}` };
    if (p.problem === "broken") return { status: "error", runs: 0, seed, path: "", message: `backend ${backend} is broken: ${p.info.reason}` };
    return null;
  };
  return { probe, verdict };
}

/**
 * A native library's checks: in its child process (spawn.ts), after the backends are built and
 * probed; the children judge the run's configuration limit (`limit`).
 */
function nativeKind({ probe, verdict }: Probing, limit: ConfigLimit): KernelKind {
  return {
    plan: nativePlanBackend,
    runs: { batch: (req) => runChild(req, limit) },
    // the native backends' checks share one child batch; the backends are built and probed first
    needs: () => ({ child: "C5", before: probe }),
    // a library backend's checks exist only when it is configured: the replay names it
    replayArgs: (backend) => (backend.startsWith("lib:") ? ["--backend", backend] : undefined),
    verdict,
  };
}

function isolationCheck(e: IsolationEntry, emuConfigured: boolean, { probe, verdict }: Probing): CheckDef {
  const base = { id: e.id, class: "C5", subject: e.subject, spec: e.spec, tolerance: e.tolerance } as const;
  if (!emuConfigured) return { ...base, kind: "skipped", reason: "the cpu-emu backend is not configured" };
  return {
    // Their own worker: each child mostly waits (the hang's for its whole timeout), which overlaps
    // the kernel checks' batch instead of adding to it.
    ...base, kind: "delegated", needs: { child: "C5 isolation", before: probe },
    delegate: ({ seed, profile }) => {
      const v = verdict("cpu-emu", seed);
      if (v !== null) return v;
      const r = crashIsolation(e.fault, profile);
      return { status: r.ok ? "pass" : "fail", runs: 1, seed, path: "", message: r.message };
    },
  };
}

/** Every C5 check of the run's native backends (`backends`), and the checks of the machinery itself. */
export function nativeKernelChecks(backends: readonly string[], limit: ConfigLimit): CheckDef[] {
  const probe = probing(backends);
  const checks: CheckDef[] = [];
  // the generated-files check first: building a backend regenerates them (ffi/build.ts)
  for (const e of parentPlan()) {
    if (e.kind === "header") checks.push({ kind: "single", id: e.id, class: "C5", subject: e.subject, spec: e.spec, tolerance: e.tolerance, run: abiHeaderCheck });
  }
  checks.push(...kernelChecks(nativeKind(probe, limit), [...backends]));
  for (const e of parentPlan()) {
    switch (e.kind) {
      case "isolation":
        checks.push(isolationCheck(e, backends.includes("cpu-emu"), probe));
        break;
      case "header":
        break;
    }
  }
  return checks;
}
