/**
 * Starting the C5 child process (conformance/c5/child.ts). Native code never runs in the suite's
 * process: probing builds and loads the backends in a child, and each backend's checks run in one
 * child; a crash, abort or hang of that child turns the check it was running, and every check it
 * did not reach, into `error` naming the signal or the timeout, and the suite goes on.
 */
import { join } from "node:path";
import { kernelBackendNames, type Resolved } from "../../ffi/backends.ts";
import type { CheckResult } from "../../harness/check.ts";
import { noteSignal } from "../../harness/interrupt.ts";
import { ROOT } from "../../paths.ts";
import { childArgs, parseProbeOutput, parseRunOutput, stubResult, type CaseLine, type ChildMode, type ChildRequest } from "./protocol.ts";
import { replayCommand } from "../../harness/run.ts";

const CHILD = join(import.meta.dir, "child.ts");

export interface ChildOutcome {
  results: Map<string, CheckResult>;
  /** Set when the child did not finish normally. */
  death?: string;
}

/** The children's environment: NLC_KERNEL_PRELOAD becomes their LD_PRELOAD (e.g. the TSan runtime). */
function childEnv(): Record<string, string | undefined> {
  const preload = process.env.NLC_KERNEL_PRELOAD;
  return preload ? { ...process.env, LD_PRELOAD: preload } : { ...process.env };
}

function spawnChild(mode: ChildMode, timeout: number, stdin?: string) {
  return Bun.spawnSync({
    cmd: [process.execPath, CHILD, ...childArgs(mode)],
    cwd: ROOT,
    // fd 3 is this process's stderr: the child's progress (kernel builds) shows while it runs.
    stdio: [stdin === undefined ? "ignore" : Buffer.from(stdin), "pipe", "pipe", 2],
    timeout,
    killSignal: "SIGKILL",
    env: { ...childEnv(), NLC_PROGRESS_FD: "3" },
  });
}

/** A batch's time limit: NLC_KERNEL_TIMEOUT seconds, else generous for the deep profile (~1 s a check). */
function batchTimeoutMs(n: number): number {
  const env = Number(process.env.NLC_KERNEL_TIMEOUT);
  if (Number.isFinite(env) && env > 0) return env * 1000;
  return 60_000 + 3_000 * n;
}

export function tail(s: string, n = 1500): string {
  const t = s.trim();
  return t.length <= n ? t : `…${t.slice(-n)}`;
}

/** The child's stderr for a message: Bun's crash banner reduced to its one informative line. */
function childStderr(s: string): string {
  const panic = s.split("\n").find((l) => l.startsWith("panic: "));
  if (panic !== undefined) return `${panic.trim()} (a fault in native kernel code; Bun's crash handler reports it as its own)`;
  return tail(s);
}

/** What died: the kernel that was being called when the process ended, if one was. */
function crashWhat(call: string | undefined, death: string, backend: string): string {
  return call !== undefined ? `kernel ${call} (backend ${backend}): the checking process ${death}` : `the child process running C5 on ${backend} ${death}`;
}

/** The case that was running, and the command that replays it. */
function crashCase(c: CaseLine | undefined, backend: string): string {
  if (c === undefined) return "";
  const sh = c.shape;
  const hyper = sh.hyper && Object.keys(sh.hyper as object).length > 0 ? ` hyper ${JSON.stringify(sh.hyper)}` : "";
  const dims = ["B", "T", "H", "d", "C"].filter((k) => sh[k] !== undefined && sh[k] !== null).map((k) => `${k}=${sh[k]}`).join(" ");
  const args = ["--backend", backend];
  return `, on the case seed ${c.seed}, path ${c.path} (${dims}${hyper}); replay: ${replayCommand(c.id, c.seed, c.path, args)}`;
}

/** Runs a batch in a child process; checks it did not report become `error` with the cause. */
export function runChild(req: ChildRequest): ChildOutcome {
  const timeout = req.timeoutMs ?? batchTimeoutMs(req.checks.length);
  const proc = spawnChild({ kind: "run", backend: req.backend, profile: req.profile }, timeout, JSON.stringify(req));
  const { results, running, lastCase, lastCall } = parseRunOutput(proc.stdout.toString());
  const stderr = childStderr(proc.stderr.toString());
  noteSignal(proc.signalCode); // a child ended by SIGINT/SIGTERM means the run was interrupted
  let death: string | undefined;
  if (proc.exitedDueToTimeout) death = `timed out after ${Math.round(timeout / 1000)} s (killed)`;
  else if (proc.signalCode !== undefined && proc.signalCode !== null) death = `killed by ${proc.signalCode}`;
  else if (proc.exitCode !== 0) death = `exited with status ${proc.exitCode}`;
  if (death !== undefined) {
    const who = `the child process running C5 on ${req.backend}`;
    for (const c of req.checks) {
      if (results.has(c.id)) continue;
      const message = c.id === running
        ? `${crashWhat(lastCall, death, req.backend)} during this check${crashCase(lastCase, req.backend)}; the rest of the suite continues` +
          (stderr ? `\nchild stderr: ${stderr}` : "")
        : `not run: ${who} ${death}${running ? ` while running ${running}` : ""}`;
      const at = c.id === running && lastCase !== undefined ? lastCase : undefined;
      results.set(c.id, stubResult(c.id, "error", message, at?.seed ?? c.seed ?? 0, at?.path ?? ""));
    }
  }
  return { results, death };
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

/** Builds and loads every configured backend in a child process (never in this one), once. */
export function probeBackends(): Resolved[] {
  if (probed !== undefined) return probed;
  const names = kernelBackendNames();
  // Building is incremental, but a fresh checkout compiles every kernel (a minute with nvcc): say so.
  const t0 = performance.now();
  console.error(`kernel backends: building (if needed) and loading ${names.join(", ")} ...`);
  const proc = spawnChild({ kind: "probe", backends: names }, 900_000);
  const text = proc.stdout.toString();
  noteSignal(proc.signalCode);
  const report = parseProbeOutput(text);
  if (proc.exitCode === 0 && report !== undefined) {
    probed = report;
  } else {
    const why = proc.exitedDueToTimeout ? "timed out" : proc.signalCode ? `killed by ${proc.signalCode}` : `exit ${proc.exitCode}`;
    const reason = `probing the kernel backends failed (${why}): ${tail(proc.stderr.toString() + text)}`;
    probed = names.map((name) => ({ info: { name, available: false, reason }, problem: "broken" as const }));
  }
  console.error(`kernel backends: ready in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  return probed;
}
