/**
 * The py: kernel backends in the catalogue (docs/spec/py-backend.md): for each
 * `--backend py:<module>:<callable>`, the plan's checks (plan.ts) as delegated checks. The first
 * one that runs starts one child process (child.ts) for every selected check of its backend and
 * caches the results; a child that dies or overruns its time limit turns the check it was running,
 * and those it did not reach, into `error` with its stderr tail, and the suite goes on.
 */
import type { CheckDef, CheckResult, DelegatedResult, DelegateOptions, Profile } from "../../harness/check.ts";
import type { BackendInfo } from "../../harness/report.ts";
import { checkSeed } from "../../harness/run.ts";
import { parseRunOutput, stubResult, type PyChildRequest } from "./child-protocol.ts";
import { kernelTimeoutMs } from "./kernel-session.ts";
import { parsePyBackend, pyBackendNames, pyPlan, type PyBackend, type PyEntry } from "./plan.ts";

const CHILD = `${import.meta.dir}/child.ts`;
const cache = new Map<string, CheckResult>();
const ran = new Map<string, string>();

const tail = (s: string, n = 1500) => (s.trim().length <= n ? s.trim() : `…${s.trim().slice(-n)}`);

/**
 * The child's time limit: each check may spend a kernel timeout (a hang is one request, then the
 * check ends) plus its cases; generous, since a slow CPU kernel is not a fault.
 */
function childTimeoutMs(n: number): number {
  return 120_000 + n * (2 * kernelTimeoutMs() + 120_000);
}

function runChild(req: PyChildRequest): Map<string, CheckResult> {
  const timeout = childTimeoutMs(req.checks.length);
  const p = Bun.spawnSync({
    cmd: [process.execPath, CHILD], stdin: Buffer.from(JSON.stringify(req)), stdout: "pipe", stderr: "pipe",
    timeout, killSignal: "SIGKILL", env: { ...process.env },
  });
  const { results, running } = parseRunOutput(p.stdout.toString());
  let death: string | undefined;
  if (p.exitedDueToTimeout) death = `timed out after ${Math.round(timeout / 1000)} s (killed)`;
  else if (p.signalCode) death = `killed by ${p.signalCode}`;
  else if (p.exitCode !== 0) death = `exited with status ${p.exitCode}`;
  if (death !== undefined) {
    const who = `the child process running ${req.backend}`;
    const stderr = tail(p.stderr.toString());
    for (const c of req.checks) {
      if (results.has(c.id)) continue;
      const message = c.id === running
        ? `${who} ${death} during this check; the rest of the suite continues${stderr ? `\nchild stderr: ${stderr}` : ""}`
        : `not run: ${who} ${death}${running ? ` while running ${running}` : ""}${stderr ? `\nchild stderr: ${stderr}` : ""}`;
      results.set(c.id, stubResult(c.id, "error", message, c.seed ?? 0));
    }
  }
  return results;
}

const key = (id: string, seed: number, profile: Profile) => `${id}|${seed}|${profile}`;

function delegate(b: PyBackend, e: PyEntry, siblings: () => readonly CheckDef[]) {
  return ({ seed, runSeed, profile, replayPath, selected }: DelegateOptions): DelegatedResult => {
    let r = cache.get(key(e.id, seed, profile));
    if (r === undefined) {
      const req: PyChildRequest = replayPath !== undefined
        ? { backend: b.name, profile, checks: [{ id: e.id, seed, path: replayPath }] }
        : { backend: b.name, profile, runSeed, checks: siblings().filter((c) => c.id === e.id || selected.has(c.id)).map((c) => ({ id: c.id })) };
      for (const [id, res] of runChild(req)) cache.set(key(id, req.runSeed !== undefined ? checkSeed(req.runSeed, id) : seed, profile), res);
      ran.set(b.name, "ran");
      r = cache.get(key(e.id, seed, profile));
      if (r === undefined) throw new Error(`the ${b.name} child process returned no result for ${e.id}`);
    }
    return {
      status: r.status, runs: r.runs, seed: r.seed, path: r.path, worst: r.worst ?? undefined, message: r.message, ms: r.ms,
      ...(r.details ? { details: r.details } : {}),
    };
  };
}

/** Every check of every configured py: backend (none unless --backend py:... is given). */
export function pyKernelChecks(): CheckDef[] {
  const out: CheckDef[] = [];
  for (const name of pyBackendNames()) {
    const b = parsePyBackend(name);
    const mine: CheckDef[] = pyPlan(b).map((e) => ({
      kind: "delegated", id: e.id, class: "C5", subject: e.subject, spec: e.spec, tolerance: e.tolerance,
      replayArgs: ["--backend", b.name], delegate: delegate(b, e, () => mine),
    }));
    out.push(...mine);
  }
  return out;
}

/** The py: backends for the report. */
export function pyBackends(): BackendInfo[] {
  return pyBackendNames().map((name) => ran.has(name)
    ? { name, available: true, device: "PyTorch kernel host (python/nlc_torch/kernel_host.py)" }
    : { name, available: false, reason: "not run: no check of this backend ran" });
}
