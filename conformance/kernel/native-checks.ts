/**
 * C5 — kernel pairs (docs/spec/conformance.md#c5; the precision rule of docs/spec/precision.md#flash):
 * the catalogue side. The checks are the plan's (native-plan.ts). Each backend's checks run in a child
 * process (spawn.ts, native-child.ts; harness/child-process.ts), started by the first of them that runs,
 * which batches every selected check of that backend (a fresh child after a crash); the results
 * are cached and handed to each check in turn.
 * The isolation and header checks run in this process.
 */
import { kernelBackendNames } from "../../ffi/backends.ts";
import type { CheckDef, DelegatedCheck, DelegatedResult, DelegateOptions } from "../../harness/check.ts";
import { ChildResults, type BatchEntry } from "../../harness/child-process.ts";
import type { BackendInfo } from "../../harness/report.ts";
import { abiHeaderCheck } from "./header.ts";
import { crashIsolation } from "./isolation.ts";
import { c5Plan, parentPlan, partOf, type ChildEntry, type ChildPart, type IsolationEntry } from "./native-plan.ts";
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

/** The children's results: one batch answers every selected check of its backend. */
const results = new ChildResults();

/** Runs a check in its backend's child: a replay alone, a normal run with every selected sibling (`siblings`: each check of the backend with its part of the plan). */
function childDelegate(backend: string, id: string, siblings: readonly BatchEntry<ChildPart>[]): (opts: DelegateOptions) => DelegatedResult {
  return (opts) => {
    const verdict = backendVerdict(backend, opts.seed) ?? results.cached(id, opts);
    if (verdict !== undefined) return verdict;
    const req = ChildResults.request(backend, id, opts, siblings);
    return results.keep(req, runChild(req), id, opts);
  };
}

function backendCheck(backend: string, e: ChildEntry, siblings: readonly BatchEntry<ChildPart>[]): DelegatedCheck {
  return {
    kind: "delegated", id: e.id, class: "C5", subject: e.subject, spec: e.spec, tolerance: e.tolerance,
    // the native backends' checks share one child batch; the backends are built and probed first
    needs: { child: "C5", before: probeBackends },
    // a library backend's checks exist only when it is configured: the replay names it
    ...(backend.startsWith("lib:") ? { replayArgs: ["--backend", backend] } : {}),
    delegate: childDelegate(backend, e.id, siblings),
  };
}

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
export function kernelChecks(): CheckDef[] {
  const backends = kernelBackendNames();
  const checks: CheckDef[] = [];
  // the generated-files check first: building a backend regenerates them (ffi/build.ts)
  for (const e of parentPlan()) {
    if (e.kind === "header") checks.push({ kind: "single", id: e.id, class: "C5", subject: e.subject, spec: e.spec, tolerance: e.tolerance, run: abiHeaderCheck });
  }
  for (const backend of backends) {
    const plan = c5Plan(backend);
    const siblings = plan.map((e) => ({ id: e.id, part: partOf(e) }));
    checks.push(...plan.map((e) => backendCheck(backend, e, siblings)));
  }
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
