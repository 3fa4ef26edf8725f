/**
 * The py: kind's part of the child program (child.ts; `jax:` too, through its adaptor): the
 * kernel's two Python processes (python/session.ts) opened for the batch, the kernel's declaration
 * read and checked once, and each check's definition (python/definitions.ts), what it declares as not
 * judged, and what its result adds: shapes, coverage, configurations, the probes' tally, the
 * device line and (a replay with --dump) the case's tensors.
 */
import { CaseDump } from "../../../harness/dump.ts";
import { DEFAULT_KERNEL_CHUNKS } from "../../../cases/kernel-batch.ts";
import { ShapeTally, withShapes } from "../../../cases/kernel-shapes.ts";
import { TorchBridgeError } from "../../../oracle/torch-bridge.ts";
import { coverage } from "../../../oracle/kernel-judge.ts";
import { HAZARD_PLAN, ProbeTally } from "../../../ffi/hazards.ts";
import { pyCheckDefinition } from "./definitions.ts";
import { KernelSession } from "./session.ts";
import { pythonDeclaration } from "./backend.ts";
import { absentInputs, NO_CONVENTIONS } from "./conventions.ts";
import { batchedCuSeqlens } from "./contracts.ts";
import { parsePyBackend } from "./plan.ts";
import type { RuleEntry } from "../plan.ts";
import { RULES } from "../../../src/rules/index.ts";
import { variantKey } from "../../../src/rules/level.ts";
import { suggestion } from "../../../harness/nearest.ts";
import { ConfigTally, configLimit } from "../../../harness/configurations.ts";
import { stubResult } from "../../../harness/child-process.ts";
import { UNDECLARED_DETAILS, type CheckResult } from "../../../harness/check.ts";
import type { ChildKind, Defined } from "../child-kind.ts";

/** The rule keys a kernel may declare: every rule of the registry and its frozen read. */
const RULE_KEYS = RULES.flatMap((d) => (d.frozen === null ? [d.key] : [d.key, variantKey(d.key, true)]));

/** A declared rule that is not in the registry is an error naming it and the nearest rule key. */
function declaredRules(rules: readonly string[], who: string): void {
  for (const r of rules) {
    if (!RULE_KEYS.includes(r)) throw new Error(`${who}: nlc['rules'] names '${r}', which is not a rule of the registry${suggestion(r, RULE_KEYS)} (docs/spec/names.md#registry)`);
  }
}

const message = (e: unknown) => (e instanceof Error ? e.message : String(e));

export const PYTHON_CHILD: ChildKind = {
  async open(req) {
    const backend = parsePyBackend(req.backend);
    // A backend that cannot be loaded (no python or torch, a module that does not import, a
    // declaration that is wrong) is one reason, given once: the backend is unavailable with it
    // (details.unavailable, read by python/checks.ts into the report's run.backends) and its checks are
    // skipped; a run that named it then fails, since it ran nothing of it
    // (docs/spec/conformance.md#nothing-ran).
    const unavailable = (reason: string) => ({
      results: (id: string, seed: number): CheckResult => ({
        ...stubResult(id, "skip", `backend ${backend.name} is unavailable (the reason is given once, with the backend)`, seed), details: { unavailable: reason },
      }),
    });
    let session: KernelSession;
    try {
      session = await KernelSession.open(backend);
    } catch (e) {
      return unavailable(e instanceof TorchBridgeError && e.kind === "unavailable" ? `PyTorch is not available: ${message(e)}` : message(e));
    }
    const who = `${backend.module}:${backend.callable}`;
    const conventions = (session.info.conventions ??= NO_CONVENTIONS);
    let limit: ReturnType<typeof configLimit>;
    try {
      limit = configLimit();
      absentInputs(conventions, [], who);
      declaredRules(session.info.rules, who);
    } catch (e) {
      await session.close();
      return unavailable(message(e));
    }
    const define = async (e: RuleEntry, c: { id: string; path?: string; dump?: string }, seed: number): Promise<Defined> => {
      const stub = (status: CheckResult["status"], text: string, extra: Partial<CheckResult> = {}): Defined =>
        ({ result: { ...stubResult(c.id, status, text, seed), subject: e.subject, spec: e.spec, ...extra } });
      // what the kernel declares for this rule variant: not judged, or not implemented; forward-only
      const declaration = pythonDeclaration(session, e.key);
      if (declaration.skip !== null) return stub("skip", declaration.skip, declaration.undeclared ? { details: UNDECLARED_DETAILS } : {});
      if (e.kind === "backward" && declaration.forwardOnly) {
        return stub("skip", `${who} declares itself forward-only (nlc['forward_only']): no backward to judge (docs/spec/py-backend.md#forward-only)`);
      }
      if (e.kind === "contract") {
        const p = declaration.precision.forward, C = Math.min(...(declaration.chunkSizes ?? DEFAULT_KERNEL_CHUNKS));
        const t0 = performance.now();
        const v = await batchedCuSeqlens(session, e.decl, e.key, e.frozen, p, conventions, C, who)
          .catch((err: unknown) => ({ status: "error" as const, message: message(err), details: {} }));
        return stub(v.status, v.message, { runs: v.status === "skip" ? 0 : 1, ms: performance.now() - t0, details: v.details });
      }
      const exercised = new Set<string>(), names = new Set<string>(), tally = new ShapeTally(), configs = new ConfigTally(limit);
      // --replay … --dump DIR: the one replayed case's tensors (harness/dump.ts)
      const dump = c.dump !== undefined && req.runSeed === undefined ? new CaseDump(c.dump) : undefined;
      const probes = new ProbeTally(HAZARD_PLAN, session.info.nondeterministic?.tolerance ?? null);
      const def = pyCheckDefinition(e, session, req.profile, ["--backend", backend.name], exercised, names, tally, configs, probes, dump);
      const after = (r: CheckResult): CheckResult => {
        const device = `${session.info.device}${session.info.interpreted === true ? " (Triton interpreter)" : ""}, ${session.info.dtype} (state ${session.info.state_dtype}), backward by ${session.info.backward}`;
        const out = withShapes(coverage(r, [...names], exercised), tally);
        // the inputs this check generated at their neutral value and did not compare (docs/spec/py-backend.md#absent)
        const absent = e.frozen ? [] : conventions.absent.filter((n) => (e.decl.gates as readonly string[]).includes(n));
        // the gates taken once per head: generated equal over a head's tokens and sequences, their gradient not compared (#per-head)
        const perHead = e.frozen ? [] : (conventions.per_head ?? []).filter((n) => (e.decl.gates as readonly string[]).includes(n));
        // every configuration judged, or the limit said (docs/spec/py-backend.md#configurations)
        const judged = configs.details(), note = configs.note();
        const text = [out.message, note === null ? null : `(${note})`, `[${device}]`].filter((x) => x).join(" ");
        if (dump !== undefined) {
          const manifest = dump.finish({ check: c.id, seed, path: c.path ?? "", kernel: who, rule: e.key, status: out.status, message: text,
            names: "kernel/sent and kernel/returned: python/PROTOCOL.md's names, batched as on the wire; judged/<tensor>/seq<n>: per sequence n = b·H + h, the kernel's values, ref64 and the plain reference" });
          process.stderr.write(`dump: ${manifest}\n`);
        }
        // the toolchain rides on each result to the parent, which lists it under the backend (python/checks.ts)
        const toolchain = session.info.toolchain !== undefined ? { toolchain: session.info.toolchain } : {};
        return { ...out, message: text, details: { ...out.details, absent, ...(perHead.length > 0 ? { per_head: perHead } : {}), probes: probes.summary(), ...toolchain, ...(judged === undefined ? {} : { configurations: judged }) } };
      };
      return { def, after };
    };
    return {
      define: (e, c, seed) => {
        if (!("decl" in e)) throw new Error(`${c.id}: a py: backend runs rule checks only`);
        return define(e, c, seed);
      },
      close: () => session.close(),
    };
  },
};
