/**
 * The child process of the C5 checks (native-checks.ts; the protocol in harness/child-process.ts and protocol.ts): native kernel code
 * runs only here, so a crash or a hang costs this process, not the suite.
 */
import { resolveBackend } from "../../ffi/backends.ts";
import type { KernelLib } from "../../ffi/lib-types.ts";
import type { Profile } from "../../harness/check.ts";
import { runCheck } from "../../harness/run.ts";
import { childCheck, needsTestLib } from "./child-checks.ts";
import { entryOf } from "./plan.ts";
import { parseChildArgs, probeLine, type ChildRequest, type Probed } from "./protocol.ts";
import { resultLine, startLine, stubResult } from "../../harness/child-process.ts";
import type { CheckResult } from "../../harness/check.ts";
import { checkSeed } from "../../harness/replay-command.ts";
import { CallWatchdog } from "../../harness/call-watchdog.ts";
import { ChildCalls, ChildCases, emit, progress } from "../../harness/child-announce.ts";

async function probe(names: string[]): Promise<void> {
  const out: Probed[] = [];
  for (const n of names) {
    const r = await resolveBackend(n, progress);
    out.push({ info: r.info, problem: r.problem });
  }
  emit(probeLine(out));
}

async function run(backend: string, profile: Profile, req: ChildRequest): Promise<void> {
  const resolved = await resolveBackend(backend, progress);
  if (resolved.lib === undefined) {
    const status = resolved.problem === "unavailable" ? "skip" : "error";
    for (const c of req.checks) emit(resultLine(stubResult(c.id, status, resolved.info.reason ?? "unavailable")));
    return;
  }
  const lib = resolved.lib;
  // each check's part of the plan, as the parent sent it
  const entries = req.checks.map((c) => (c.part === undefined ? undefined : entryOf(c.part)));
  let testLib: KernelLib | undefined;
  if (entries.some((e) => e !== undefined && needsTestLib(e))) {
    const t = await resolveBackend("cpu-test", progress);
    if (t.lib === undefined) throw new Error(`the cpu-test library is not usable: ${t.info.reason}`);
    testLib = t.lib;
  }
  const watchdog = req.callTimeoutMs !== undefined ? new CallWatchdog(req.callTimeoutMs) : undefined;
  const getTestLib = (): KernelLib => {
    if (testLib === undefined) throw new Error("the cpu-test library was not loaded");
    return testLib;
  };
  const calls = new ChildCalls(watchdog);
  for (const [i, c] of req.checks.entries()) {
    const entry = entries[i];
    emit(startLine(c.id));
    if (entry === undefined) {
      emit(resultLine(stubResult(c.id, "error", `the request for C5 check '${c.id}' on backend ${backend} carries no part of the plan`)));
      continue;
    }
    const { def, after } = childCheck(entry, lib, profile, getTestLib);
    const seed = req.runSeed !== undefined ? checkSeed(req.runSeed, c.id) : c.seed ?? 0;
    // each case announced by the runner before it runs, each kernel call by the library before it is made (harness/child-announce.ts)
    const cases = new ChildCases(seed, c.path ?? "");
    // a call's own limit starts at the check and again at every kernel call, after this process's start-up
    watchdog?.arm();
    lib.onCall = calls.call;
    const r0 = req.runSeed !== undefined
      ? runCheck(def, { seed: req.runSeed, profile, onCase: cases.add })
      : runCheck(def, { seed: 0, profile, replay: { seed: c.seed ?? 0, path: c.path ?? "" }, onCase: cases.add });
    watchdog?.disarm();
    // the digest of the cases this check generated, for a sweep's evidence that its seeds differed (docs/spec/conformance.md#sweep-digests)
    const d = cases.digest();
    const r = d.cases > 0 ? { ...r0, details: { ...r0.details, case_digest: d } } : r0;
    emit(resultLine(unsupportedAsSkip(after === undefined ? r : after(r))));
  }
  watchdog?.close();
}

/** A kernel that returns NLK_ERR_UNSUPPORTED (e.g. for a C it does not implement) is a skip that says so. */
function unsupportedAsSkip(r: CheckResult): CheckResult {
  if (r.status !== "error" || !/returned status -4 /.test(r.message ?? "")) return r;
  return { ...r, status: "skip", message: `unsupported by the library (NLK_ERR_UNSUPPORTED): ${r.message}` };
}

const mode = parseChildArgs(process.argv.slice(2));
if (mode.kind === "probe") await probe(mode.backends);
else await run(mode.backend, mode.profile, JSON.parse(await Bun.stdin.text()) as ChildRequest);
