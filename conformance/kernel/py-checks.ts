/**
 * The py: kernel backends in the catalogue (docs/spec/py-backend.md): for each
 * `--backend py:<module>:<callable>`, the plan's checks (py-plan.ts) as delegated checks. The first
 * one that runs starts a child process (py-child.ts; harness/child-process.ts) for every selected
 * check of its backend and caches the results; a child that dies or overruns its time limit turns
 * the check it was running into `error` with its stderr tail, and a fresh child runs the rest.
 */
import type { CheckDef, CheckResult, DelegatedResult, DelegateOptions } from "../../harness/check.ts";
import { ChildResults, runBatch, type BatchEntry, type BatchRequest, type ChildTimeout } from "../../harness/child-process.ts";
import type { BackendInfo } from "../../harness/report.ts";
import type { Toolchain } from "../../ffi/toolchain.ts";
import { kernelTimeoutMs, kernelTimeoutSetting, mayRunTriton } from "./kernel-session.ts";
import { parsePyBackend, pyBackendNames, pyIdCollision, pyPartOf, pyPlan, type PyBackend, type PyEntry, type PyPart } from "./py-plan.ts";

const CHILD = `${import.meta.dir}/py-child.ts`;
/** The backends whose child ran, with the toolchain it reported. */
const ran = new Map<string, Toolchain | null>();

/**
 * The child's time limit: each check may spend a kernel timeout (a hang is one request, then the
 * check ends) plus its cases; generous, since a slow CPU kernel is not a fault. A module that may
 * run Triton kernels (its source names triton or fla) gets the interpreted kernels' timeout, since
 * without a GPU they are interpreted (docs/spec/py-backend.md#triton-cpu).
 */
function childTimeout(triton: boolean): ChildTimeout {
  return { baseMs: 120_000, perCheckMs: 2 * kernelTimeoutMs(triton) + 120_000 };
}

/** Backends whose child could not load the kernel: the reason, given once (py-child.ts). */
const unavailable = new Map<string, string>();

const results = new ChildResults();

/** A batch of a backend's checks in children (a fresh one after each death); the toolchain and an unavailable backend noted for the report. */
function runPyBatch(req: BatchRequest<PyPart>): Map<string, CheckResult> {
  const triton = mayRunTriton(parsePyBackend(req.backend));
  const r = runBatch({
    cmd: [process.execPath, CHILD], who: `the child process running ${req.backend}`, timeout: childTimeout(triton),
    timeoutSetting: `2 x ${kernelTimeoutSetting(triton)} + 120 s a check`, replayArgs: ["--backend", req.backend],
  }, req);
  // the toolchain comes on every result; it belongs to the backend, not to each check
  let toolchain: Toolchain | null = ran.get(req.backend) ?? null;
  for (const [id, res] of r) {
    const why = res.details?.unavailable;
    if (typeof why === "string") unavailable.set(req.backend, why);
    const { toolchain: t, ...details } = (res.details ?? {}) as { toolchain?: Toolchain };
    if (t !== undefined) {
      toolchain = t;
      r.set(id, { ...res, details });
    }
  }
  ran.set(req.backend, toolchain);
  return r;
}

/** A check's result: from an earlier batch of its backend, or from the batch it asks for (`siblings`: each check of the backend with its part of the plan). */
function delegate(b: PyBackend, e: PyEntry, siblings: readonly BatchEntry<PyPart>[]) {
  return (opts: DelegateOptions): DelegatedResult => {
    const cached = results.cached(e.id, opts);
    if (cached !== undefined) return cached;
    const req = ChildResults.request(b.name, e.id, opts, siblings);
    return results.keep(req, runPyBatch(req), e.id, opts);
  };
}

/** Every check of every configured py: backend (none unless --backend py:... is given). */
export function pyKernelChecks(): CheckDef[] {
  const out: CheckDef[] = [];
  const collision = pyIdCollision(pyBackendNames(), "NLC_PY_BACKENDS");
  if (collision !== null) throw new Error(collision);
  for (const name of pyBackendNames()) {
    const b = parsePyBackend(name);
    const plan = pyPlan(b);
    const siblings = plan.map((e) => ({ id: e.id, part: pyPartOf(e) }));
    const mine: CheckDef[] = plan.map((e) => ({
      kind: "delegated", id: e.id, class: "C5", subject: e.subject, spec: e.spec, tolerance: e.tolerance,
      replayArgs: ["--backend", b.name], delegate: delegate(b, e, siblings),
      needs: { child: `C5 ${b.name}` }, // one Python host per backend, beside the others
    }));
    out.push(...mine);
  }
  return out;
}

/** The py: backends for the report. */
export function pyBackends(): BackendInfo[] {
  return pyBackendNames().map((name) => unavailable.has(name)
    ? { name, available: false, reason: unavailable.get(name)! }
    : ran.has(name)
    ? { name, available: true, device: "PyTorch kernel host (python/nlc_torch/kernel_host.py)", ...(ran.get(name) ? { toolchain: ran.get(name)! } : {}) }
    : { name, available: false, reason: "not run: no check of this backend ran" });
}
