/**
 * A time limit that starts when the work it guards starts, not when the process did
 * (docs/spec/kernel-abi.md#isolation): a child process arms it before each kernel call (and at the
 * start of each check), and a thread of its own ends the process when it expires, after writing
 * CALL_TIMEOUT with the limit to stdout, so that the parent reports a timeout
 * (harness/child-process.ts) instead of a kill. A kernel that hangs blocks the child's main
 * thread, not this one; the parent's own limit for the whole batch stays as the last resort.
 */
export const CALL_TIMEOUT = "@@nlc-call-timeout ";

export class CallWatchdog {
  private readonly worker: Worker;

  constructor(private readonly ms: number) {
    this.worker = new Worker(new URL("./call-watchdog-worker.ts", import.meta.url).href);
  }

  /** (Re)starts the limit from now. */
  arm(): void {
    this.worker.postMessage({ arm: this.ms });
  }

  disarm(): void {
    this.worker.postMessage({ arm: null });
  }

  close(): void {
    this.worker.terminate();
  }
}
