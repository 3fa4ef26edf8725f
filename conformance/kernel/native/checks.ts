/**
 * C5 on native libraries (docs/spec/conformance.md#c5; the precision rule of docs/spec/precision.md#flash):
 * what the native kind supplies to the one catalogue (checks.ts). Each backend's checks are the
 * plan's (plan.ts, with native/plan.ts's style) and run in a child process (spawn.ts, child.ts native;
 * harness/child-process.ts), after the backends are built and probed in a child; an unavailable
 * backend's checks are skipped, a broken one's are errors, without running. The checks of the
 * machinery itself (the ABI header, crash isolation: plan.ts parentPlan) run in this process.
 */
import { kernelBackendNames } from "../../../ffi/backends.ts";
import type { CheckDef, DelegatedResult } from "../../../harness/check.ts";
import type { BackendInfo } from "../../../harness/report.ts";
import { kernelChecks, type KernelKind } from "../checks.ts";
import { abiHeaderCheck } from "./header.ts";
import { crashIsolation } from "./isolation.ts";
import { nativePlanBackend } from "./plan.ts";
import { parentPlan, type IsolationEntry } from "../plan.ts";
import { probeBackends, probedBackends, runChild } from "./spawn.ts";

/**
 * The kernel backends for the report (ref is the catalogue's own). They are probed only when a
 * C5 check ran; otherwise they are listed as not probed, so a run filtered to other classes
 * never builds kernels.
 */
export function kernelBackends(): BackendInfo[] {
  const probed = probedBackends();
  if (probed !== undefined) return probed.map((p) => p.info);
  return kernelBackendNames().map((name) => ({ name, available: false, reason: "not probed: no C5 check ran in this run" }));
}

function probedAs(backend: string) {
  const p = probeBackends().find((x) => x.info.name === backend);
  if (p === undefined) throw new Error(`backend ${backend} was not probed`);
  return p;
}

/**
 * Why the checks of a backend will be skipped (it is unavailable: no GPU, no compiler), known
 * before they run; null when they run. Probes the backends (once) on first use.
 */
function backendSkipReason(backend: string): string | null {
  const p = probedAs(backend);
  return p.problem === "unavailable" ? `backend ${backend} unavailable: ${p.info.reason}` : null;
}

/** Skip or error without running when the backend is unavailable or broken; null when usable. */
function backendVerdict(backend: string, seed: number): DelegatedResult | null {
  const skip = backendSkipReason(backend);
  if (skip !== null) return { status: "skip", runs: 0, seed, path: "", message: skip };
  const p = probedAs(backend);
  if (p.problem === "broken") return { status: "error", runs: 0, seed, path: "", message: `backend ${backend} is broken: ${p.info.reason}` };
  return null;
}

/** A native library's checks: in its child process (spawn.ts), after the backends are built and probed. */
const NATIVE_KIND: KernelKind = {
  plan: nativePlanBackend,
  runs: { batch: runChild },
  // the native backends' checks share one child batch; the backends are built and probed first
  needs: () => ({ child: "C5", before: probeBackends }),
  // a library backend's checks exist only when it is configured: the replay names it
  replayArgs: (backend) => (backend.startsWith("lib:") ? ["--backend", backend] : undefined),
  verdict: backendVerdict,
};

function isolationCheck(e: IsolationEntry, emuConfigured: boolean): CheckDef {
  const base = { id: e.id, class: "C5", subject: e.subject, spec: e.spec, tolerance: e.tolerance } as const;
  if (!emuConfigured) return { ...base, kind: "skipped", reason: "the cpu-emu backend is not configured" };
  return {
    // Their own worker: each child mostly waits (the hang's for its whole timeout), which overlaps
    // the kernel checks' batch instead of adding to it.
    ...base, kind: "delegated", needs: { child: "C5 isolation", before: probeBackends },
    delegate: ({ seed, profile }) => {
      const verdict = backendVerdict("cpu-emu", seed);
      if (verdict !== null) return verdict;
      const r = crashIsolation(e.fault, profile);
      return { status: r.ok ? "pass" : "fail", runs: 1, seed, path: "", message: r.message };
    },
  };
}

/** Every C5 check: per configured backend, and the checks of the machinery itself. */
export function nativeKernelChecks(): CheckDef[] {
  const backends = kernelBackendNames();
  const checks: CheckDef[] = [];
  // the generated-files check first: building a backend regenerates them (ffi/build.ts)
  for (const e of parentPlan()) {
    if (e.kind === "header") checks.push({ kind: "single", id: e.id, class: "C5", subject: e.subject, spec: e.spec, tolerance: e.tolerance, run: abiHeaderCheck });
  }
  checks.push(...kernelChecks(NATIVE_KIND, backends));
  for (const e of parentPlan()) {
    switch (e.kind) {
      case "isolation":
        checks.push(isolationCheck(e, backends.includes("cpu-emu")));
        break;
      case "header":
        break;
    }
  }
  return checks;
}
