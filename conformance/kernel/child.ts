/**
 * The child process of a kernel backend's checks, for every kind of backend
 * (docs/spec/kernel-abi.md#isolation): kernel code runs only here, so a crash or a hang costs this
 * process, not the suite. The parent (harness/child-process.ts runBatch) sends the part of the plan
 * of each check (plan.ts Part); this program opens the backend through its kind's entry (a module
 * of its own, loaded by name: the child loads only its kind's code), runs each check with the one
 * runner (harness/run.ts; a case announced before it runs) and prints "@@nlc-start <id>" before and
 * "@@nlc-result <json>" after each check, so the parent knows which check (and case) was running if
 * this process itself dies.
 *
 *   bun conformance/kernel/child.ts <kind> < request.json          (the kind's batch request)
 *   bun conformance/kernel/child.ts <kind> --probe --backends a,b   (a kind that probes: each backend's state, one line)
 */
import type { CheckResult } from "../../harness/check.ts";
import { runCheck } from "../../harness/run.ts";
import { checkSeed } from "../../harness/replay-command.ts";
import { resultLine, startLine, stubResult, type BatchRequest } from "../../harness/child-process.ts";
import { ChildCases, emit } from "../../harness/child-announce.ts";
import { entryOf, type Part } from "./plan.ts";
import type { ChildKind, ChildKindName, ChildSession } from "./child-kind.ts";

/** The kinds' modules, by the name the parent starts the child with: a child loads its own kind's only. */
const CHILD_KINDS: Record<ChildKindName, () => Promise<ChildKind>> = {
  native: async () => (await import("./native/child.ts")).NATIVE_CHILD,
  python: async () => (await import("./python/child.ts")).PYTHON_CHILD,
};

async function run(session: ChildSession, req: BatchRequest<Part>): Promise<void> {
  for (const c of req.checks) {
    emit(startLine(c.id));
    const seed = req.runSeed !== undefined ? checkSeed(req.runSeed, c.id) : c.seed ?? 0;
    // the check's part of the plan, as the parent sent it
    if (c.part === undefined) {
      emit(resultLine(stubResult(c.id, "error", `the request for check '${c.id}' on backend ${req.backend} carries no part of the plan`, seed)));
      continue;
    }
    const defined = await session.define(entryOf(c.part), c, seed);
    if ("result" in defined) {
      emit(resultLine(defined.result));
      continue;
    }
    // each case announced by the runner before it runs (harness/child-announce.ts), and digested
    const cases = new ChildCases(seed, c.path ?? "");
    session.starting?.();
    const opts = req.runSeed !== undefined
      ? { seed: req.runSeed, profile: req.profile, onCase: cases.add }
      : { seed: 0, profile: req.profile, replay: { seed, path: c.path ?? "" }, onCase: cases.add };
    const r0: CheckResult = defined.def.kind === "async-property" ? await runCheck(defined.def, opts) : runCheck(defined.def, opts);
    session.finished?.();
    // the digest of the cases this check generated, for a sweep's evidence that its seeds differed (docs/spec/conformance.md#sweep-digests)
    const d = cases.digest();
    const r = d.cases > 0 ? { ...r0, details: { ...r0.details, case_digest: d } } : r0;
    emit(resultLine(defined.after === undefined ? r : defined.after(r)));
  }
}

const [name, ...args] = process.argv.slice(2);
const load = CHILD_KINDS[name as keyof typeof CHILD_KINDS];
if (load === undefined) throw new Error(`conformance/kernel/child.ts: unknown kind '${name}' (expected ${Object.keys(CHILD_KINDS).join(", ")})`);
const kind = await load();
if (args.includes("--probe")) {
  if (kind.probe === undefined) throw new Error(`conformance/kernel/child.ts: the ${name} kind has no probe`);
  await kind.probe(args);
} else {
  const req = JSON.parse(await Bun.stdin.text()) as BatchRequest<Part>;
  const opened = await kind.open(req);
  if ("results" in opened) {
    for (const c of req.checks) emit(resultLine(opened.results(c.id, c.seed ?? 0)));
  } else {
    try {
      await run(opened, req);
    } finally {
      await opened.close();
    }
  }
}
process.exit(0);
