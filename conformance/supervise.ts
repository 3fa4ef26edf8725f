/**
 * The CLI runs its checks in a child of itself that leads its own process group, and passes
 * SIGINT/SIGTERM on to that whole group: the runner, the kernel child it is waiting on (spawned
 * synchronously, so the runner cannot pass a signal on while it waits) and the PyTorch bridge all
 * receive it. The runner then stops after the check in flight and writes a partial report. When
 * this process's own parent dies (a shell ended by npm, which passes SIGTERM to its script's shell
 * only), the runner is sent SIGTERM: an orphaned run never overwrites a complete report.
 */
import { spawn } from "node:child_process";
import { constants } from "node:os";
import { INTERRUPT_SIGNALS } from "../oracle/child-signals.ts";
import { interruptWhenOrphaned } from "../harness/interrupt.ts";
import { childEnvironment, environment } from "../environment.ts";

/**
 * Whether this command line runs checks (then it runs in a supervised child): options only, none
 * of which just prints (help, the list, a summary, a case). A subcommand (a first word such as
 * `sweep`, `diff`, `selftest`) supervises itself where it needs to.
 */
export function runsChecks(argv: readonly string[]): boolean {
  if (argv.length > 0 && !argv[0]!.startsWith("-")) return false;
  return !argv.some((a) => ["-h", "--help", "--list", "--summary", "--case"].includes(a));
}

/** True in the runner (or where supervision is off: NLC_RUNNER=1 runs the checks in this process). */
export function isRunner(): boolean {
  return environment().NLC_RUNNER === "1";
}

/** Runs this same command as the runner and returns its exit status (128 + n when a signal ended it). */
export function superviseSelf(): Promise<number> {
  const child = spawn(process.execPath, process.argv.slice(1), {
    stdio: "inherit",
    detached: true,
    env: childEnvironment({ NLC_RUNNER: "1" }),
  });
  const pass = (sig: NodeJS.Signals) => {
    try {
      process.kill(-child.pid!, sig);
    } catch {
      // the group is gone
    }
  };
  for (const sig of INTERRUPT_SIGNALS) process.on(sig, () => pass(sig));
  // Our parent died without passing its signal on (npm does that to a script's shell): SIGTERM.
  interruptWhenOrphaned(() => pass("SIGTERM"));
  return new Promise((resolve) => {
    // Ended by a signal: 128 + its number, as a shell reports it (130 SIGINT, 143 SIGTERM, 137 SIGKILL).
    child.on("exit", (code, signal) => resolve(code ?? 128 + (signal !== null ? constants.signals[signal] ?? 0 : 0)));
    child.on("error", (e) => {
      console.error(`conformance: cannot start the runner: ${e.message}`);
      resolve(1);
    });
  });
}
