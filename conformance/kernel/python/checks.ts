/**
 * The py: kernel backends (docs/spec/py-backend.md): what the py: kind supplies to the one catalogue
 * (checks.ts) for each `--backend py:<module>:<callable>`: the plan's checks (plan.ts, with
 * python/plan.ts's style) run in a child process (child.ts python; harness/child-process.ts), one for
 * every selected check of its backend; a child that dies or overruns its time limit turns the
 * check it was running into `error` with its stderr tail, and a fresh child runs the rest. What
 * the report lists under the backend (unavailable, or the toolchain) is read from its results.
 */
import type { CheckDef } from "../../../harness/check.ts";
import { runBatch, type BatchRequest, type ChildTimeout } from "../../../harness/child-process.ts";
import type { BackendInfo } from "../../../harness/report.ts";
import type { Toolchain } from "../../../ffi/toolchain.ts";
import { kernelChecks, type KernelKind } from "../checks.ts";
import { kernelTimeoutMs, kernelTimeoutSetting, mayRunTriton } from "./session.ts";
import type { Part } from "../plan.ts";
import { parsePyBackend, pyPlanBackend } from "./plan.ts";
import type { ConfigLimit } from "../../../harness/configurations.ts";
import { childCommand } from "../child-kind.ts";

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

/** Backends whose child could not load the kernel: the reason, given once (python/child.ts). */
const unavailable = new Map<string, string>();

/**
 * A backend's batch in its child, which judges the run's configuration limit (`limit`); the
 * backend's unavailability and toolchain noted for the report.
 */
function runPyBatch(req: BatchRequest<Part>, limit: ConfigLimit) {
  const triton = mayRunTriton(parsePyBackend(req.backend));
  const r = runBatch({
    ...childCommand("python", [], limit), who: `the child process running ${req.backend}`, timeout: childTimeout(triton),
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

const pyKind = (limit: ConfigLimit): KernelKind => ({
  plan: (name) => pyPlanBackend(parsePyBackend(name)),
  runs: { batch: (req) => runPyBatch(req, limit) },
  needs: (name) => ({ child: `C5 ${name}` }), // one Python host per backend, beside the others
  replayArgs: (name) => ["--backend", name],
});

/** Every check of the run's py: backends (`names`; none unless --backend py:... is given), or of its jax: ones; `limit`: the configurations they judge. */
export function pyKernelChecks(names: readonly string[], limit: ConfigLimit): CheckDef[] {
  return kernelChecks(pyKind(limit), [...names]);
}

/** The run's py: (or jax:) backends (`names`) for the report. */
export function pyBackends(names: readonly string[], device = "PyTorch kernel host (python/nlc_torch/kernel_host.py)"): BackendInfo[] {
  return names.map((name) => unavailable.has(name)
    ? { name, available: false, reason: unavailable.get(name)! }
    : ran.has(name)
    ? { name, available: true, device, ...(ran.get(name) ? { toolchain: ran.get(name)! } : {}) }
    : { name, available: false, reason: "not run: no check of this backend ran" });
}
