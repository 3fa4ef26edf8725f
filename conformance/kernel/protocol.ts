/**
 * The parent/child protocol of the C5 checks. The child is started as
 *
 *   bun conformance/kernel/native-child.ts --probe --backends cpu-emu,cuda
 *       builds (if needed) and loads each backend; prints one line "@@nlc-probe <json>"
 *   bun conformance/kernel/native-child.ts --backend cpu-emu --profile default  < request.json
 *       runs the requested checks (ChildRequest) and prints the lines of harness/child-process.ts:
 *       each check's start and result, each case before it runs and each kernel call before it is made
 */
import { parseArgs } from "node:util";
import type { Resolved } from "../../ffi/backends.ts";
import { PROFILES, type Profile } from "../../harness/check.ts";
import type { BatchRequest } from "../../harness/child-process.ts";
import type { Part } from "./plan.ts";

/** A batch (harness/child-process.ts) of C5 plan parts, and what only C5's child takes. */
export interface ChildRequest extends BatchRequest<Part> {
  timeoutMs?: number;
  /** A limit for each kernel call (and check) from its own start, kept by the child itself (harness/call-watchdog.ts). */
  callTimeoutMs?: number;
}

/** What the probe reports per backend (the library itself stays in the child). */
export type Probed = Omit<Resolved, "lib">;

/** The child's command line, parsed. */
export type ChildMode = { kind: "probe"; backends: string[] } | { kind: "run"; backend: string; profile: Profile };

export function childArgs(mode: ChildMode): string[] {
  return mode.kind === "probe"
    ? ["--probe", "--backends", mode.backends.join(",")]
    : ["--backend", mode.backend, "--profile", mode.profile];
}

export function parseChildArgs(argv: string[]): ChildMode {
  const { values } = parseArgs({
    args: argv,
    options: { probe: { type: "boolean" }, backends: { type: "string" }, backend: { type: "string" }, profile: { type: "string" } },
  });
  if (values.probe) return { kind: "probe", backends: (values.backends ?? "").split(",").filter((s) => s !== "") };
  if (values.backend === undefined) throw new Error("conformance/kernel/native-child.ts: --backend or --probe is required");
  const profile = (values.profile ?? "default") as Profile;
  if (!PROFILES.includes(profile)) throw new Error(`conformance/kernel/native-child.ts: unknown profile '${profile}'`);
  return { kind: "run", backend: values.backend, profile };
}

const PROBE = "@@nlc-probe ";

export const probeLine = (p: Probed[]): string => `${PROBE}${JSON.stringify(p)}`;

/** The probe child's report, or undefined when it printed none. */
export function parseProbeOutput(stdout: string): Probed[] | undefined {
  const line = stdout.split("\n").find((l) => l.startsWith(PROBE));
  return line === undefined ? undefined : (JSON.parse(line.slice(PROBE.length)) as Probed[]);
}
