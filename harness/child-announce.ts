/**
 * What a kernel child process announces (its protocol lines, `emit`: both children; the case and call lines: conformance/kernel/native/child.ts) on its stdout while a
 * check runs, written by the code that runs the case or the call: the runner's onCase hook
 * (harness/run.ts RunOptions.onCase) announces each case before it runs, a library's onCall hook
 * (ffi/lib-types.ts KernelLib.onCall) each kernel call before it is made and arms the call's
 * watchdog. So a crash or a hang names the kernel call and the case (harness/child-process.ts reads
 * the lines; docs/spec/kernel-abi.md#isolation), and the child hands the runner and the library
 * these objects' methods, not functions of its own.
 */
import { writeSync } from "node:fs";
import type { RuleCaseSpec } from "../cases/rule-case.ts";
import { environment } from "../environment.ts";
import type { CallWatchdog } from "./call-watchdog.ts";
import { callLine, caseLine } from "./child-process.ts";
import { CaseDigester, type CaseDigest } from "./case-digest.ts";

/** One protocol line on the child's stdout (harness/child-process.ts reads them), written at once. */
export function emit(line: string): void {
  writeSync(1, `${line}\n`);
}

/** A progress line: to fd 3 (the parent's stderr, live) when the parent gave one; else to stderr. */
export function progress(s: string): void {
  writeSync(environment().NLC_PROGRESS_FD === "3" ? 3 : 2, `${s}\n`);
}

/** The shape of a generated case, for the crash report (a batch AbiCaseSpec, or a rule case spec). */
export function caseShape(v: unknown): Record<string, unknown> {
  const k = v as { base?: RuleCaseSpec; B?: number; H?: number; C?: number } & Partial<RuleCaseSpec>;
  const spec = k.base ?? (k as RuleCaseSpec);
  if (spec?.d === undefined) return {};
  return { B: k.B ?? 1, T: spec.seq_len, H: k.H ?? 1, d: spec.d, C: k.C ?? null, hyper: spec.hyper, caseSeed: spec.seed };
}

/**
 * One check's cases, as the runner generates them (`add` is its onCase): each announced
 * ("@@nlc-case") before it runs — the n-th case is fast-check path n, counted from the replayed
 * path's first number — and digested for a sweep's evidence that its seeds differed
 * (docs/spec/conformance.md#sweep-digests).
 */
export class ChildCases {
  private n: number;
  private readonly digester = new CaseDigester();
  constructor(private readonly seed: number, replayPath: string) {
    this.n = replayPath === "" ? 0 : Number(replayPath.split(":")[0]);
  }
  readonly add = (id: string, input: unknown): void => {
    this.digester.add(id, input);
    emit(caseLine({ id, seed: this.seed, path: String(this.n++), shape: caseShape(input) }));
  };
  digest(): CaseDigest {
    return this.digester.result();
  }
}

/** A library's kernel calls (`call` is its onCall): each announced ("@@nlc-call") and its own time limit started. */
export class ChildCalls {
  constructor(private readonly watchdog: CallWatchdog | undefined) {}
  readonly call = (symbol: string): void => {
    emit(callLine(symbol));
    this.watchdog?.arm();
  };
}
