/**
 * What only the native kind's child (child.ts native, native/child.ts) adds to the protocol:
 *
 *   bun conformance/kernel/child.ts native --probe --backends cpu-emu,cuda
 *       builds (if needed) and loads each backend; prints one line "@@nlc-probe <json>"
 *   bun conformance/kernel/child.ts native  < request.json
 *       runs the requested checks (ChildRequest) and prints the lines of harness/child-process.ts:
 *       each check's start and result, each case before it runs and each kernel call before it is made
 */
import type { Resolved } from "../../../ffi/backends.ts";
import type { BatchRequest } from "../../../harness/child-process.ts";
import type { Part } from "../plan.ts";

/** A batch (harness/child-process.ts) of C5 plan parts, and what only C5's child takes. */
export interface ChildRequest extends BatchRequest<Part> {
  timeoutMs?: number;
  /** A limit for each kernel call (and check) from its own start, kept by the child itself (harness/call-watchdog.ts). */
  callTimeoutMs?: number;
}

/** What the probe reports per backend (the library itself stays in the child). */
export type Probed = Omit<Resolved, "lib">;

const PROBE = "@@nlc-probe ";

export const probeLine = (p: Probed[]): string => `${PROBE}${JSON.stringify(p)}`;

/** The probe child's report, or undefined when it printed none. */
export function parseProbeOutput(stdout: string): Probed[] | undefined {
  const line = stdout.split("\n").find((l) => l.startsWith(PROBE));
  return line === undefined ? undefined : (JSON.parse(line.slice(PROBE.length)) as Probed[]);
}
