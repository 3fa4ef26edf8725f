/**
 * Interrupts reach child processes: while a child runs, SIGINT or SIGTERM received by this process
 * is passed on to it. When nothing else in this process handles the signal, it is then raised
 * again with the default action, so this process ends as it would have without the forwarding.
 */
export const INTERRUPT_SIGNALS = ["SIGINT", "SIGTERM"] as const;
export type InterruptSignal = (typeof INTERRUPT_SIGNALS)[number];

export function isInterruptSignal(s: unknown): s is InterruptSignal {
  return s === "SIGINT" || s === "SIGTERM";
}

/** Starts forwarding to `child`; returns the function that stops it (call it when the child exits). */
export function forwardInterrupts(child: { kill(signal?: number | NodeJS.Signals): void }): () => void {
  const handlers = INTERRUPT_SIGNALS.map((sig) => {
    const h = () => {
      try {
        child.kill(sig);
      } catch {
        // already gone
      }
      if (process.listenerCount(sig) === 1) {
        stop();
        process.kill(process.pid, sig);
      }
    };
    process.on(sig, h);
    return [sig, h] as const;
  });
  const stop = () => {
    for (const [sig, h] of handlers) process.off(sig, h);
  };
  return stop;
}
