/**
 * Whether the run was interrupted: SIGINT/SIGTERM caught by this process, or a child process that
 * died of one (the signal reached the child, e.g. from the terminal or a process-group kill). An
 * interrupted run stops after the check in flight, drops that check (its result is the
 * interruption's, not the code's), and writes what finished as a partial report beside the
 * complete one (never over it).
 */
import { INTERRUPT_SIGNALS, isInterruptSignal, type InterruptSignal } from "../oracle/child-signals.ts";

let caught: InterruptSignal | null = null;

export function interruptedBy(): InterruptSignal | null {
  return caught;
}

/** Called with a child's terminating signal (or ours): an interrupt signal marks the run interrupted. */
export function noteSignal(signal: unknown): void {
  if (caught === null && isInterruptSignal(signal)) caught = signal;
}

/**
 * From now on SIGINT/SIGTERM mark the run interrupted instead of ending the process; the returned
 * function restores the default (a process that goes on after its run, as bun test does, ends on
 * the next signal again). A first SIGINT lets the check in flight finish; a SIGTERM, or a second
 * SIGINT, is a hard stop: `onHardStop` (default: endDescendants) ends the child processes in flight
 * at once (a kernel host computing for minutes), so the run writes its partial report now
 * (docs/spec/conformance.md#partial-report).
 */
export function catchInterrupts(onHardStop: () => void = endDescendants): () => void {
  const handlers = INTERRUPT_SIGNALS.map((sig) => [sig, () => {
    const again = caught !== null;
    noteSignal(sig);
    if (sig === "SIGTERM" || again) onHardStop();
  }] as const);
  for (const [sig, h] of handlers) process.on(sig, h);
  return () => {
    for (const [sig, h] of handlers) process.off(sig, h);
  };
}

/** The exit status of a process ended by the signal (128 + its number), as shells report it. */
export function signalExitCode(sig: InterruptSignal): number {
  return sig === "SIGINT" ? 130 : 143;
}

/** Where an interrupted run's report goes: beside the complete one. */
export function partialPath(reportPath: string): string {
  return reportPath.endsWith(".json") ? `${reportPath.slice(0, -5)}.partial.json` : `${reportPath}.partial.json`;
}

/**
 * A run whose parent died (npm ended by a signal it did not pass on, a supervisor killed) is
 * interrupted, as by SIGTERM: it stops after the check in flight and writes a partial report, so an
 * orphan never overwrites a complete report (docs/spec/conformance.md#partial-report).
 * `onOrphaned` runs once when that is noticed (checked every 250 ms, between checks' work).
 */
export function interruptWhenOrphaned(onOrphaned: () => void = () => noteSignal("SIGTERM")): () => void {
  const parent = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    onOrphaned();
  }, 250);
  timer.unref();
  return () => clearInterval(timer);
}

/** Every live descendant of `root` (children first, then theirs), from `ps` (POSIX: Linux and macOS alike). */
export function descendantPids(root: number = process.pid): number[] {
  const ps = Bun.spawnSync({ cmd: ["ps", "-A", "-o", "pid=", "-o", "ppid="], stdout: "pipe", stderr: "ignore" });
  const children = new Map<number, number[]>();
  for (const line of ps.stdout.toString().split("\n")) {
    const [pid, ppid] = line.trim().split(/\s+/).map(Number);
    if (!Number.isInteger(pid) || !Number.isInteger(ppid) || pid === ps.pid) continue;
    children.set(ppid!, [...(children.get(ppid!) ?? []), pid!]);
  }
  const out: number[] = [];
  for (let i = -1, at = root; i < out.length; at = out[++i]!) out.push(...(children.get(at) ?? []));
  return out;
}

/** How long a descendant gets to end on SIGTERM before SIGKILL. */
const HARD_STOP_GRACE_MS = 2_000;

/**
 * Ends every descendant process: SIGTERM now (a child that dies of it reads as interrupted, not
 * crashed), SIGKILL to what is still alive after HARD_STOP_GRACE_MS. The Python kernel hosts are
 * descendants through the zygote's launcher, whose death ends its child (python/nlc_zygote.py).
 */
function endDescendants(): void {
  const pids = descendantPids();
  const send = (pid: number, sig: NodeJS.Signals) => {
    try {
      process.kill(pid, sig);
    } catch {
      // already gone
    }
  };
  for (const pid of pids) send(pid, "SIGTERM");
  const kill = () => {
    for (const pid of [...pids, ...descendantPids()]) send(pid, "SIGKILL");
  };
  const timer = setTimeout(kill, HARD_STOP_GRACE_MS);
  timer.unref();
  // a run that writes its partial report and exits sooner leaves none of them behind either
  process.once("exit", () => {
    for (const pid of pids) send(pid, "SIGKILL");
  });
}
