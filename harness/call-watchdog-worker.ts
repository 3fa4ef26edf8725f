/** The thread of a CallWatchdog (harness/call-watchdog.ts): on expiry, says so on stdout and ends the process. */
import { writeSync } from "node:fs";
import { CALL_TIMEOUT } from "./call-watchdog.ts";

declare const self: Worker;

let timer: ReturnType<typeof setTimeout> | undefined;

self.onmessage = (ev: MessageEvent<{ arm: number | null }>) => {
  if (timer !== undefined) clearTimeout(timer);
  timer = undefined;
  const ms = ev.data.arm;
  if (ms === null) return;
  timer = setTimeout(() => {
    writeSync(1, `\n${CALL_TIMEOUT}${ms}\n`);
    process.kill(process.pid, "SIGKILL");
  }, ms);
};
