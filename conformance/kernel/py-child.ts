/**
 * The child process of a py: backend's checks (py-checks.ts starts it): an asynchronous run of the
 * requested checks against one kernel, with its two Python processes (kernel-session.ts). It
 * prints "@@nlc-start <id>" before and "@@nlc-result <json>" after each check, so the parent
 * knows which check was running if this process itself is killed.
 *
 *   bun conformance/kernel/py-child.ts < request.json      (BatchRequest)
 */
import { CaseDump } from "../../harness/dump.ts";
import { DEFAULT_KERNEL_CHUNKS } from "../../cases/kernel-batch.ts";
import { ShapeTally, withShapes } from "../../cases/kernel-shapes.ts";
import { TorchBridgeError } from "../../oracle/torch-bridge.ts";
import { coverage } from "../../oracle/kernel-judge.ts";
import { HAZARD_PLAN, ProbeTally } from "../../ffi/hazards.ts";
import { CaseDigester } from "../../harness/sweep.ts";
import { pyCheckDefinition } from "./kernel-cases.ts";
import { KernelSession } from "./kernel-session.ts";
import { pythonDeclaration } from "./python-backend.ts";
import { absentInputs, NO_CONVENTIONS } from "./conventions.ts";
import { batchedCuSeqlens } from "./contracts.ts";
import { parsePyBackend } from "./py-plan.ts";
import { ruleEntryOf, type RulePart } from "./plan.ts";
import { RULES } from "../../src/rules/index.ts";
import { variantKey } from "../../src/rules/level.ts";
import { suggestion } from "../../harness/nearest.ts";
import { runAsyncCheck } from "./run-async.ts";
import { ConfigTally, configLimit, type ConfigLimit } from "../../harness/configurations.ts";
import { resultLine, startLine, stubResult, type BatchRequest } from "../../harness/child-process.ts";
import { UNDECLARED_DETAILS } from "../../harness/check.ts";
import { emit } from "../../harness/child-announce.ts";


/** The rule keys a kernel may declare: every rule of the registry and its frozen read. */
const RULE_KEYS = RULES.flatMap((d) => (d.frozen === null ? [d.key] : [d.key, variantKey(d.key, true)]));

/** A declared rule that is not in the registry is an error naming it and the nearest rule key. */
function declaredRules(rules: readonly string[], who: string): void {
  for (const r of rules) {
    if (!RULE_KEYS.includes(r)) throw new Error(`${who}: nlc['rules'] names '${r}', which is not a rule of the registry${suggestion(r, RULE_KEYS)} (docs/spec/names.md#registry)`);
  }
}

async function run(req: BatchRequest<RulePart>): Promise<void> {
  const backend = parsePyBackend(req.backend);
  // A backend that cannot be loaded (no python or torch, a module that does not import, a
  // declaration that is wrong) is one reason, given once: the backend is unavailable with it
  // (details.unavailable, read by py-checks.ts into the report's run.backends) and its checks are
  // skipped; a run that named it then fails, since it ran nothing of it
  // (docs/spec/conformance.md#nothing-ran).
  const unavailable = (reason: string) => {
    for (const c of req.checks) {
      emit(resultLine({ ...stubResult(c.id, "skip", `backend ${backend.name} is unavailable (the reason is given once, with the backend)`, c.seed ?? 0), details: { unavailable: reason } }));
    }
  };
  let session: KernelSession;
  try {
    session = await KernelSession.open(backend);
  } catch (e) {
    const why = e instanceof Error ? e.message : String(e);
    return unavailable(e instanceof TorchBridgeError && e.kind === "unavailable" ? `PyTorch is not available: ${why}` : why);
  }
  const who = `${backend.module}:${backend.callable}`;
  let limit: ConfigLimit;
  try {
    limit = configLimit();
  } catch (e) {
    await session.close();
    return unavailable(e instanceof Error ? e.message : String(e));
  }
  session.info.conventions ??= NO_CONVENTIONS;
  try {
    absentInputs(session.info.conventions, [], who);
    declaredRules(session.info.rules, who);
  } catch (e) {
    await session.close();
    return unavailable(e instanceof Error ? e.message : String(e));
  }
  try {
    for (const c of req.checks) {
      emit(startLine(c.id));
      // the check's part of the plan, as the parent sent it
      if (c.part === undefined) {
        emit(resultLine(stubResult(c.id, "error", `the request for check '${c.id}' on backend ${backend.name} carries no part of the plan`, c.seed ?? 0)));
        continue;
      }
      const e = ruleEntryOf(c.part);
      const seed = c.seed ?? 0;
      // what the kernel declares for this rule variant: not judged, or not implemented; forward-only
      const declaration = pythonDeclaration(session, e.key);
      if (declaration.skip !== null) {
        emit(resultLine({ ...stubResult(c.id, "skip", declaration.skip, seed), subject: e.subject, spec: e.spec, ...(declaration.undeclared ? { details: UNDECLARED_DETAILS } : {}) }));
        continue;
      }
      if (e.kind === "backward" && declaration.forwardOnly) {
        emit(resultLine({ ...stubResult(c.id, "skip", `${who} declares itself forward-only (nlc['forward_only']): no backward to judge (docs/spec/py-backend.md#forward-only)`, seed), subject: e.subject, spec: e.spec }));
        continue;
      }
      if (e.kind === "contract") {
        const p = declaration.precision.forward, C = Math.min(...(declaration.chunkSizes ?? DEFAULT_KERNEL_CHUNKS));
        const t0 = performance.now();
        const v = await batchedCuSeqlens(session, e.decl, e.key, e.frozen, p, session.info.conventions, C, who)
          .catch((err: unknown) => ({ status: "error" as const, message: err instanceof Error ? err.message : String(err), details: {} }));
        emit(resultLine({ ...stubResult(c.id, v.status, v.message, seed), subject: e.subject, spec: e.spec, runs: v.status === "skip" ? 0 : 1, ms: performance.now() - t0, details: v.details }));
        continue;
      }
      const exercised = new Set<string>(), names = new Set<string>(), tally = new ShapeTally(), configs = new ConfigTally(limit);
      // --replay … --dump DIR: the one replayed case's tensors (harness/dump.ts)
      const dump = c.dump !== undefined && req.runSeed === undefined ? new CaseDump(c.dump) : undefined;
      const probes = new ProbeTally(HAZARD_PLAN, session.info.nondeterministic?.tolerance ?? null);
      const def = pyCheckDefinition(e, session, req.profile, ["--backend", backend.name], exercised, names, tally, configs, probes, dump);
      // the digest of the cases this check generated, for a sweep's evidence that its seeds differed (docs/spec/conformance.md#sweep-digests)
      const dg = new CaseDigester();
      const r0 = req.runSeed !== undefined
        ? await runAsyncCheck(def, { seed: req.runSeed, profile: req.profile, onCase: dg.add })
        : await runAsyncCheck(def, { seed: 0, profile: req.profile, replay: { seed, path: c.path ?? "" }, onCase: dg.add });
      const d = dg.result();
      const r = d.cases > 0 ? { ...r0, details: { ...r0.details, case_digest: d } } : r0;
      const device = `${session.info.device}${session.info.interpreted === true ? " (Triton interpreter)" : ""}, ${session.info.dtype} (state ${session.info.state_dtype}), backward by ${session.info.backward}`;
      const out = withShapes(coverage(r, [...names], exercised), tally);
      // the inputs this check generated at their neutral value and did not compare (docs/spec/py-backend.md#absent)
      const absent = e.frozen ? [] : session.info.conventions.absent.filter((n) => (e.decl.gates as readonly string[]).includes(n));
      // the gates taken once per head: generated equal over a head's tokens and sequences, their gradient not compared (#per-head)
      const perHead = e.frozen ? [] : (session.info.conventions.per_head ?? []).filter((n) => (e.decl.gates as readonly string[]).includes(n));
      // every configuration judged, or the limit said (docs/spec/py-backend.md#configurations)
      const judged = configs.details(), note = configs.note();
      const message = [out.message, note === null ? null : `(${note})`, `[${device}]`].filter((x) => x).join(" ");
      if (dump !== undefined) {
        const manifest = dump.finish({ check: c.id, seed, path: c.path ?? "", kernel: `${backend.module}:${backend.callable}`, rule: e.key, status: out.status, message,
          names: "kernel/sent and kernel/returned: python/PROTOCOL.md's names, batched as on the wire; judged/<tensor>/seq<n>: per sequence n = b·H + h, the kernel's values, ref64 and the plain reference" });
        process.stderr.write(`dump: ${manifest}\n`);
      }
      // the toolchain rides on each result to the parent, which lists it under the backend (py-checks.ts)
      const toolchain = session.info.toolchain !== undefined ? { toolchain: session.info.toolchain } : {};
      emit(resultLine({ ...out, message, details: { ...out.details, absent, ...(perHead.length > 0 ? { per_head: perHead } : {}), probes: probes.summary(), ...toolchain, ...(judged === undefined ? {} : { configurations: judged }) } }));
    }
  } finally {
    await session.close();
  }
}

await run(JSON.parse(await Bun.stdin.text()) as BatchRequest<RulePart>);
process.exit(0);
