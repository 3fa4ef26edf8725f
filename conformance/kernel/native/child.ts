/**
 * The native kind's part of the child program (child.ts): a library through ffi/nlk.h, resolved (built
 * if needed) and loaded in the child; each kernel call announced and under its own time limit
 * (harness/call-watchdog.ts); the cpu-test library loaded for the checks that call its planted kernels.
 */
import { parseArgs } from "node:util";
import { resolveBackend } from "../../../ffi/backends.ts";
import type { KernelLib } from "../../../ffi/lib-types.ts";
import type { CheckResult } from "../../../harness/check.ts";
import { stubResult } from "../../../harness/child-process.ts";
import { CallWatchdog } from "../../../harness/call-watchdog.ts";
import { ChildCalls, emit, progress } from "../../../harness/child-announce.ts";
import { childCheck, needsTestLib } from "./definitions.ts";
import { entryOf } from "../plan.ts";
import { probeLine, type ChildRequest, type Probed } from "./protocol.ts";
import type { ChildKind } from "../child-kind.ts";

/** A kernel that returns NLK_ERR_UNSUPPORTED (e.g. for a C it does not implement) is a skip that says so. */
function unsupportedAsSkip(r: CheckResult): CheckResult {
  if (r.status !== "error" || !/returned status -4 /.test(r.message ?? "")) return r;
  return { ...r, status: "skip", message: `unsupported by the library (NLK_ERR_UNSUPPORTED): ${r.message}` };
}

export const NATIVE_CHILD: ChildKind = {
  async probe(args) {
    const { values } = parseArgs({ args: [...args], options: { probe: { type: "boolean" }, backends: { type: "string" } } });
    const out: Probed[] = [];
    for (const n of (values.backends ?? "").split(",").filter((s) => s !== "")) {
      const r = await resolveBackend(n, progress);
      out.push({ info: r.info, problem: r.problem });
    }
    emit(probeLine(out));
  },
  async open(request) {
    const req = request as ChildRequest;
    const resolved = await resolveBackend(req.backend, progress);
    const lib = resolved.lib;
    if (lib === undefined) {
      const status = resolved.problem === "unavailable" ? "skip" : "error";
      return { results: (id) => stubResult(id, status, resolved.info.reason ?? "unavailable") };
    }
    let testLib: KernelLib | undefined;
    if (req.checks.some((c) => c.part !== undefined && needsTestLib(entryOf(c.part)))) {
      const t = await resolveBackend("cpu-test", progress);
      if (t.lib === undefined) throw new Error(`the cpu-test library is not usable: ${t.info.reason}`);
      testLib = t.lib;
    }
    const getTestLib = (): KernelLib => {
      if (testLib === undefined) throw new Error("the cpu-test library was not loaded");
      return testLib;
    };
    const watchdog = req.callTimeoutMs !== undefined ? new CallWatchdog(req.callTimeoutMs) : undefined;
    const calls = new ChildCalls(watchdog);
    return {
      define: (e) => {
        const { def, after } = childCheck(e, lib, req.profile, getTestLib);
        return { def, after: (r) => unsupportedAsSkip(after === undefined ? r : after(r)) };
      },
      // a call's own limit starts at the check and again at every kernel call, after this process's start-up
      starting: () => {
        watchdog?.arm();
        lib.onCall = calls.call;
      },
      finished: () => watchdog?.disarm(),
      close: () => watchdog?.close(),
    };
  },
};
