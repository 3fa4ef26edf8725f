/**
 * One generated case of a py: forward or backward check (docs/spec/py-backend.md#forward-check,
 * #backward-check): the kernel's tensors against ref64 under the flash-attention bound, per tensor
 * and sequence (oracle/kernel-judge.ts).
 *
 * ref64 is the TypeScript reference pair in f64: forward (y, every final state) and backward given
 * dy AND a random non-zero d(final state) (every input gradient, and dState0, the initial
 * state's). ref32, the yardstick of the bound and the bias test, is the plain reference at the
 * kernel's precision: the PyTorch reference run in f32 (forward and autograd backward), its outputs
 * rounded to the kernel's storage and state dtypes (docs/spec/py-backend.md#reference, #precision).
 */
import type { CaseOutcome } from "../../harness/check.ts";
import type { Precision } from "../../src/precision.ts";
import type { InnerInputs, RuleDecl, State } from "../../src/rules/types.ts";
import type { Tensor } from "../../src/tensor.ts";
import { CaseDump } from "../../harness/dump.ts";
import type { Compared } from "../../oracle/kernel-judge.ts";
import { comparedItems, kernelLabel, tensorName, type KernelNames, type TensorKey } from "../../cases/kernel-tensors.ts";
import { flashCompare } from "../../oracle/kernel-judge.ts";
import type { SeqTensors } from "../../oracle/kernel-case.ts";
import { referenceRun } from "../../oracle/kernel-reference.ts";
import { seqCfg, toKernelGrads, type PyCase } from "./cases.ts";
import type { KernelSession } from "./kernel-session.ts";
import { backwardKeys, forwardKeys, pythonBackend } from "./python-backend.ts";
import type { KernelRun } from "../../cases/kernel-backend.ts";
import { hazardVerdict, type ProbeTally } from "../../ffi/hazards.ts";
import { acrossConfigurations, ConfigTally, type Judgement } from "./configurations.ts";
import { withPlausibility } from "./plausible.ts";
import { tf32Yardstick } from "./tf32-yardstick.ts";

const asInputs = (r: Record<string, Tensor>) => r as unknown as InnerInputs;

export const forwardNames = (c: PyCase): string[] => forwardKeys(c).map((k) => tensorName(k, c.frozen, "py"));
export const backwardNames = (c: PyCase): string[] => backwardKeys(c).map((k) => tensorName(k, c.frozen, "py"));

/** ref64 of sequence n alone, at its own length: the reference's forward and backward (oracle/kernel-reference.ts). */
function ref64(decl: RuleDecl, c: PyCase, n: number): SeqTensors {
  const q = c.seqs[n]!;
  return referenceRun(decl, c.frozen, { inputs: asInputs(q.in64), state: q.st64 as State, dy: q.dy64, dFinal: q.dFinal64 as State }, seqCfg(c, n), "both");
}

/** A file name from a tensor's name: `dM (initial state)` -> `dM_initial_state_`. */
const fileName = (name: string) => name.replace(/[^A-Za-z0-9._-]+/g, "_");

/**
 * The case's tensors into `dump` (--replay … --dump DIR): the request's tensors as sent to the
 * kernel and its reply, batched as on the wire (python/PROTOCOL.md names), and per compared tensor
 * and sequence the kernel's values, ref64 and the plain reference, as judged.
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
 * yardstick, under every configuration of the kernel (configurations.ts; `configs` collects them),
 * each call under the hazard probes (`probes`; docs/spec/hazards.md).
 */
async function pyPhaseCase(s: KernelSession, decl: RuleDecl, key: string, c: PyCase, exercised: Set<string>, p: Precision, which: "forward" | "backward",
  configs: ConfigTally, probes?: ProbeTally, dump?: CaseDump): Promise<CaseOutcome> {
  const keys = which === "forward" ? forwardKeys(c) : backwardKeys(c);
  const backend = pythonBackend(s);
  const conv = s.info.conventions;
  const names: KernelNames = { keywords: conv?.keywords ?? {}, initialState: conv?.initial_state ?? "initial_state", stateDict: conv?.state_dict ?? false, states: c.stateNames };
  let refs: { r64: SeqTensors[]; r32: SeqTensors[] } | undefined;
  const judge = async (configuration: string | null): Promise<Judgement> => {
    const dumping = dump !== undefined && configuration === null;
    if (dumping) {
      s.onExchange = (op, sent, got) => {
        for (const [n, t] of sent) dump.tensor(`kernel/sent/${fileName(n)}.npy`, t.shape, t.data, `${op}: ${n} as sent to the kernel (in its parametrisation and layout)`);
        for (const [n, t] of got) dump.tensor(`kernel/returned/${fileName(n)}.npy`, t.shape, t.data, `${op}: ${n} as the kernel returned it`);
      };
    }
    const t0 = performance.now();
    let run: KernelRun;
    try {
      const batch = { c, rule: key, configuration };
      run = which === "forward" ? await backend.forward(batch) : await backend.backward(batch);
    } finally {
      s.onExchange = null;
    }
    const kernelMs = performance.now() - t0;
    // a read past an input's end, a write into an input, two runs that differ: named as such, before any comparison (docs/spec/hazards.md)
    const hazard = hazardVerdict(run.hazards, run.who);
    if (hazard !== null) return { outcome: hazard, kernelMs };
    probes?.add(run.rerunMaxRel);
    const kernel = run.perSeq;
    // the references once per case, after the kernel's first call (a kernel that fails at once never needs them)
    refs ??= await references(s, decl, key, c, p, keys, which);
    const items = comparedItems(kernel, refs.r64, refs.r32, c.frozen, "py", false, (k, ours) => kernelLabel(k, ours, names));
    if (dumping) dumpCase(dump, c, items);
    const outcome = flashCompare(items, exercised, `${s.backend.module}:${s.backend.callable}`, p,
      // the shape-dependent output mutations assume sequences of one length T: none for a packed batch;
      // the output mutations (the judge's own power) once per case, under the default
      { ...(c.packed === null ? { layout: { B: c.B, H: c.H, T: c.T } } : {}), ...(configuration === null ? {} : { mutations: false }) });
    return { outcome: withPlausibility(outcome, items, s.info.interpreted === true), kernelMs };
  };
  return acrossConfigurations(configs, () => s.lastReply, judge);
}

async function references(s: KernelSession, decl: RuleDecl, key: string, c: PyCase, p: Precision, keys: TensorKey[], which: "forward" | "backward") {
  // a packed batch's sequence is judged against the reference run on that sequence alone (docs/spec/py-backend.md#packed)
  const r64 = c.seqs.map((_, n) => toKernelGrads(c, n, ref64(decl, c, n)));
  const r32 = p.accumulate === "tf32" ? tf32Yardstick(decl, c, p, r64) : await s.plainReference(c, key, p, keys, r64);
  if (which === "backward") {
    for (const k of keys) {
      if (k.part === "dState0" && r64[0]!.dState0[k.name] === undefined) throw new Error(`the reference backward of ${key} returns no gradient of the state ${k.name}`);
    }
  }
  return { r64, r32 };
}

export const pyForwardCase = (s: KernelSession, decl: RuleDecl, key: string, c: PyCase, exercised: Set<string>, p: Precision, configs = new ConfigTally(), probes?: ProbeTally, dump?: CaseDump): Promise<CaseOutcome> =>
  pyPhaseCase(s, decl, key, c, exercised, p, "forward", configs, probes, dump);
export const pyBackwardCase = (s: KernelSession, decl: RuleDecl, key: string, c: PyCase, exercised: Set<string>, p: Precision, configs = new ConfigTally(), probes?: ProbeTally, dump?: CaseDump): Promise<CaseOutcome> =>
  pyPhaseCase(s, decl, key, c, exercised, p, "backward", configs, probes, dump);
