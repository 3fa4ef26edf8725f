/**
 * The cases of a py: forward or backward check (docs/spec/py-backend.md#forward-check,
 * #backward-check) and each one's run: the kernel's tensors against ref64 under the flash-attention
 * bound, per tensor and sequence (oracle/kernel-judge.ts), judged by the steps every backend's
 * phase case takes (cases/kernel-phase.ts), taken here in order on data: the Python request, the
 * references in the kernel's parametrisation, the yardstick, the configurations, the dump.
 *
 * ref64 is the TypeScript reference pair in f64: forward (y, every final state) and backward given
 * dy AND a random non-zero d(final state) (every input gradient, and dState0, the initial
 * state's). ref32, the yardstick of the bound and the bias test, is the plain reference at the
 * kernel's precision: the PyTorch reference run in f32 (forward and autograd backward), its outputs
 * rounded to the kernel's storage and state dtypes (docs/spec/py-backend.md#reference, #precision).
 */
import type { AsyncPropertyCheck, CaseOutcome, Profile } from "../../../harness/check.ts";
import { DEFAULT_KERNEL_CHUNKS, type CanonicalCaseSpec } from "../../../cases/kernel-batch.ts";
import { phaseCheck } from "../phase-check.ts";
import type { ShapeTally } from "../../../cases/kernel-shapes.ts";
import { buildPyCase, describeCase, pyPackedExample, toKernelGrads, type PyCase } from "./canonical-case.ts";
import { pyEdgeExamples, pyEmptyExample } from "./edges.ts";
import { NO_CONVENTIONS } from "./conventions.ts";
import type { RuleEntry } from "../plan.ts";
import type { Precision } from "../../../src/precision.ts";
import type { RuleDecl } from "../../../src/rules/types.ts";
import { CaseDump } from "../../../harness/dump.ts";
import type { Compared } from "../../../oracle/kernel-judge.ts";
import { tensorName, type KernelNames, type TensorKey } from "../../../cases/kernel-tensors.ts";
import type { SeqTensors } from "../../../oracle/kernel-case.ts";
import { kernelNames, type Exchange, type KernelSession } from "./session.ts";
import { backwardKeys, forwardKeys, pythonBackend, pythonDeclaration } from "./backend.ts";
import { kernelYardstick, phaseVerdict, type PhaseReferences } from "../../../cases/kernel-phase.ts";
import type { ProbeTally } from "../../../ffi/hazards.ts";
import { listedConfigurations, underConfiguration } from "./configurations.ts";
import type { ConfigTally, Judgement } from "../../../harness/configurations.ts";
import { withPlausibility } from "./plausible.ts";

const forwardNames = (c: PyCase): string[] => forwardKeys(c).map((k) => tensorName(k, c.frozen, "py"));
const backwardNames = (c: PyCase): string[] => backwardKeys(c).map((k) => tensorName(k, c.frozen, "py"));

/** A file name from a tensor's name: `dM (initial state)` -> `dM_initial_state_`. */
const fileName = (name: string) => name.replace(/[^A-Za-z0-9._-]+/g, "_");

/**
 * A tensor of a request (`sent`) or a reply as the kernel calls it, from its wire name
 * (python/PROTOCOL.md, conformance/kernel/python/session.ts wire): in.alpha -> its keyword (g),
 * state.M -> its initial-state keyword (final state in a reply), dstate.M -> dfinal_state,
 * grads.alpha -> dg, grads.state.M -> dinitial_state; dy and y as they are.
 */
export function kernelWireName(wire: string, sent: boolean, names: KernelNames): string {
  const stateOf = (base: string, n: string) => (names.stateDict || names.states.length > 1 ? `${base}.${n}` : base);
  const dot = wire.indexOf("."), head = dot < 0 ? wire : wire.slice(0, dot), tail = dot < 0 ? "" : wire.slice(dot + 1);
  if (head === "in") return names.keywords[tail] ?? tail;
  if (head === "state") return sent ? stateOf(names.initialState, tail) : names.outputs?.[tail] ?? stateOf("final_state", tail);
  if (head === "y" && !sent) return names.outputs?.y ?? "y";
  if (head === "dstate") return `d${stateOf("final_state", tail)}`;
  if (head === "grads") return tail.startsWith("state.") ? `d${stateOf(names.initialState, tail.slice(6))}` : `d${names.keywords[tail] ?? tail}`;
  return wire;
}

/** The kernel requests' tensors and replies, batched as on the wire, into `dump`, each named as the kernel calls it (its wire name in the description). */
function dumpExchanges(dump: CaseDump, exchanges: readonly Exchange[], names: KernelNames): void {
  for (const { op, sent, got } of exchanges) {
    for (const [n, t] of sent) {
      const k = kernelWireName(n, true, names);
      dump.tensor(`kernel/sent/${fileName(k)}.npy`, t.shape, t.data, `${op}: ${k} as sent to the kernel (in its parametrisation and layout; python/PROTOCOL.md ${n})`);
    }
    for (const [n, t] of got) {
      const k = kernelWireName(n, false, names);
      dump.tensor(`kernel/returned/${fileName(k)}.npy`, t.shape, t.data, `${op}: ${k} as the kernel returned it (python/PROTOCOL.md ${n})`);
    }
  }
}

/**
 * The case's judged tensors into `dump` (--replay … --dump DIR): per compared tensor and sequence
 * the kernel's values, ref64 and the plain reference, as judged.
 */
function dumpCase(dump: CaseDump, c: PyCase, items: readonly Compared[]): void {
  for (const it of items) {
    const n = it.ref64.length, w = n / c.T;
    const shape = it.part === "token" && c.packed === null && Number.isInteger(w) ? [c.T, w] : Math.sqrt(n) % 1 === 0 && it.part === "state" ? [Math.sqrt(n), Math.sqrt(n)] : [n];
    const at = `judged/${fileName(it.name)}/seq${it.seq}`;
    if (it.kernel !== undefined && it.kernel.length === n) dump.tensor(`${at}.kernel.npy`, shape, it.kernel, `${it.label ?? it.name}, sequence ${it.seq}: the kernel's values`);
    dump.tensor(`${at}.ref64.npy`, shape, it.ref64, `${it.label ?? it.name}, sequence ${it.seq}: the f64 reference`);
    dump.tensor(`${at}.plain.npy`, shape, it.ref32, `${it.label ?? it.name}, sequence ${it.seq}: the plain reference at the kernel's precision (the yardstick)`);
  }
}

/**
 * One phase of a case: the kernel's tensors `keys` against ref64, the plain reference as the
 * yardstick, under every configuration of the kernel (`configs` collects them), each call under the
 * hazard probes (`probes`; docs/spec/hazards.md): the phase case every backend's case is
 * (cases/kernel-phase.ts phaseVerdict), its call and yardstick answering later, its references
 * computed once per case (after the kernel's first call: a kernel that fails at once never needs them).
 */
async function pyPhaseCase(s: KernelSession, decl: RuleDecl, key: string, c: PyCase, exercised: Set<string>, p: Precision, which: "forward" | "backward",
  configs: ConfigTally, probes?: ProbeTally, dump?: CaseDump): Promise<CaseOutcome> {
  const keys = which === "forward" ? forwardKeys(c) : backwardKeys(c);
  const backend = pythonBackend(s);
  const names = kernelNames(c, s.info.conventions);
  const cache: { refs?: PhaseReferences } = {};
  const judge = async (configuration: string | null): Promise<Judgement> => {
    const dumping = dump !== undefined && configuration === null;
    let kernelMs = 0;
    const outcome = await phaseVerdict({
      decl, frozen: c.frozen, seqs: c.seqs, cfg: c.cfg, exercised, precision: p, style: "py", all: false, names, cache,
      who: `${s.backend.module}:${s.backend.callable}`,
      run: async () => {
        if (dumping) s.exchanges = [];
        const t0 = performance.now();
        try {
          const batch = { c, rule: key, configuration };
          return which === "forward" ? await backend.forward(batch) : await backend.backward(batch);
        } finally {
          kernelMs = performance.now() - t0;
          if (dumping) dumpExchanges(dump, s.exchanges ?? [], names);
          s.exchanges = null;
        }
      },
      afterRun: (run) => probes?.add({ runs: run.runs ?? 0, ...(run.rerunMaxRel !== undefined ? { rerunMaxRel: run.rerunMaxRel } : {}) }),
      // a packed batch's sequence is judged against the reference run on that sequence alone (docs/spec/py-backend.md#packed)
      reference: { phases: "both" }, toKernel: (n, r) => toKernelGrads(c, n, r),
      yardstick: (r64) => yardstick(s, decl, key, c, p, keys, which, r64),
      // the shape-dependent output mutations assume sequences of one length T: none for a packed batch;
      // the output mutations (the judge's own power) once per case, under the default
      options: { ...(c.packed === null ? { layout: { B: c.B, H: c.H, T: c.T } } : {}), ...(configuration === null ? {} : { mutations: false }) },
      ...(dumping ? { onItems: (items: readonly Compared[]) => dumpCase(dump, c, items) } : {}),
      judged: (v, items) => withPlausibility(v, items, s.info.interpreted === true),
    });
    return { outcome, kernelMs };
  };
  // the default first, then each configuration the host listed after that call, up to the first that fails
  const { outcome: first, kernelMs } = await judge(null);
  const listed = listedConfigurations(s.lastReply);
  configs.add(listed.base, kernelMs);
  configs.reached(listed.names, listed.same, listed.autotuned);
  if (listed.names.length === 0) return first;
  if (!first.ok) return first.vacuous === true ? first : underConfiguration(first, listed.base);
  if (configs.limit === "first") return first;
  for (const name of listed.names) {
    const { outcome, kernelMs: ms } = await judge(name);
    configs.add(name, ms);
    if (!outcome.ok && outcome.vacuous !== true) return underConfiguration(outcome, name);
  }
  return first;
}

/** The yardstick the declaration names: the TF32 plain reference, else PyTorch's at the kernel's precision. */
async function yardstick(s: KernelSession, decl: RuleDecl, key: string, c: PyCase, p: Precision, keys: TensorKey[], which: "forward" | "backward", r64: readonly SeqTensors[]) {
  // TF32 products: the TypeScript plain reference (PyTorch's has no TF32 mode)
  const r32 = p.accumulate === "tf32"
    ? kernelYardstick({ decl, frozen: c.frozen, seqs: c.seqs, cfg: c.cfg, reference: { phases: "both" }, precision: p, toKernel: (n, r) => toKernelGrads(c, n, r) })(r64)
    : await s.plainReference(c, key, p, keys, r64);
  if (which === "backward") {
    for (const k of keys) {
      if (k.part === "dState0" && r64[0]!.dState0[k.name] === undefined) throw new Error(`the reference backward of ${key} returns no gradient of the state ${k.name}`);
    }
  }
  return r32;
}

/**
 * A py: check's definition (phase-check.ts, its cases awaited): a kernel that takes `cu_seqlens` also
 * gets a packed batch in each regime case and, in every profile, the declared packed case
 * (docs/spec/py-backend.md#packed), and the edge cases after the guard case (edges.ts). Every batch's
 * shape goes into the tally (details.shapes).
 */
export function pyCheckDefinition(e: RuleEntry, s: KernelSession, profile: Profile, replayArgs: string[], exercised: Set<string>, names: Set<string>,
  tally: ShapeTally, configs: ConfigTally, probes: ProbeTally, dump?: CaseDump): AsyncPropertyCheck<any> {
  const declaration = pythonDeclaration(s, e.key);
  const p = declaration.precision[e.kind === "backward" ? "backward" : "forward"];
  const chunks = declaration.chunkSizes ?? DEFAULT_KERNEL_CHUNKS;
  const C = Math.min(...chunks);
  const packed = declaration.varlen;
  const one = async (spec: CanonicalCaseSpec): Promise<CaseOutcome> => {
    const c = buildPyCase(e.decl, spec, e.frozen, p, s.info.conventions);
    if (c.packed !== null) tally.addPacked({ lengths: c.packed.lengths, H: c.H, d: c.cfg.d }, C);
    else tally.add({ B: c.B, T: c.T, H: c.H, d: c.cfg.d }, C);
    for (const n of e.kind === "forward" ? forwardNames(c) : backwardNames(c)) names.add(n);
    return pyPhaseCase(s, e.decl, e.key, c, exercised, p, e.kind === "forward" ? "forward" : "backward", configs, probes, dump);
  };
  // the edge cases (a frozen read writes nothing: none of the write edges) and, for a kernel taking cu_seqlens, the empty sequence
  const edges = [...pyEdgeExamples(e.decl, C, s.info.conventions ?? NO_CONVENTIONS, e.frozen, e.decl.gates), ...(packed ? [pyEmptyExample(e.decl, C)] : [])];
  const base = { id: e.id, class: "C5" as const, subject: e.subject, spec: e.spec, tolerance: e.tolerance, replayArgs };
  return phaseCheck(e, base, {
    form: "canonical", answers: "later", chunks, packed, one, chunkOf: () => C,
    describe: (spec) => describeCase(buildPyCase(e.decl, spec, e.frozen, p, s.info.conventions)),
    declared: { beforeGuard: packed ? [pyPackedExample(e.decl, C)] : [], afterGuard: edges },
  }, profile) as AsyncPropertyCheck<any>;
}
