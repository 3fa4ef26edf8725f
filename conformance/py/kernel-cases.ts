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
import { comparedItems, fromInnerGrads, tensorName, type TensorKey } from "../../cases/kernel-batch.ts";
import { flashCompare } from "../../oracle/kernel-judge.ts";
import type { SeqTensors } from "../../oracle/plain-reference.ts";
import { seqCfg, toKernelGrads, type PyCase } from "./cases.ts";
import { readReply, type KernelSession } from "./kernel-session.ts";
import { acrossConfigurations, ConfigTally, type Judgement } from "./configurations.ts";
import { withPlausibility } from "./plausible.ts";

const asInputs = (r: Record<string, Tensor>) => r as unknown as InnerInputs;

/** The tensors a forward check compares: y and (active pairs) every final state. */
function forwardKeys(c: PyCase): TensorKey[] {
  return [{ part: "y" }, ...(c.frozen ? [] : c.stateNames.map((name): TensorKey => ({ part: "state", name })))];
}

/** The tensors a backward check compares: every input's gradient and the state's. */
function backwardKeys(c: PyCase): TensorKey[] {
  return [...c.kernelInputs.map((name): TensorKey => ({ part: "grad", name })), ...c.stateNames.map((name): TensorKey => ({ part: "dState0", name }))];
}

export const forwardNames = (c: PyCase): string[] => forwardKeys(c).map((k) => tensorName(k, c.frozen, "py"));
export const backwardNames = (c: PyCase): string[] => backwardKeys(c).map((k) => tensorName(k, c.frozen, "py"));

/** The reference's f64 forward and backward of sequence n alone, at its own length (active pair, or the frozen read). */
function ref64(decl: RuleDecl, c: PyCase, n: number): SeqTensors {
  const q = c.seqs[n]!, cfg = seqCfg(c, n);
  if (c.frozen) {
    const fz = decl.frozen!;
    const fw = fz.forward(q.in64.q!, q.st64 as State, cfg);
    const g = fz.backward(fw.saved, q.in64.q!, q.dy64, cfg);
    return { y: fw.y.data, state: {}, grads: { q: g.dq.data }, dState0: Object.fromEntries(Object.entries(g.dState).map(([n, t]) => [n, t.data])) };
  }
  const fw = decl.inner.forward(asInputs(q.in64), q.st64 as State, cfg);
  const g = decl.inner.backward(fw.saved, asInputs(q.in64), q.dy64, cfg, q.dFinal64 as State);
  return { y: fw.y.data, state: Object.fromEntries(Object.entries(fw.finalState).map(([n, t]) => [n, t.data])), ...fromInnerGrads(g) };
}

/**
 * One phase of a case: the kernel's tensors `keys` against ref64, the plain reference as the
 * yardstick, under every configuration of the kernel (configurations.ts; `configs` collects them).
 */
async function phaseCase(s: KernelSession, decl: RuleDecl, key: string, c: PyCase, exercised: Set<string>, p: Precision, which: "forward" | "backward",
  configs: ConfigTally): Promise<CaseOutcome> {
  const keys = which === "forward" ? forwardKeys(c) : backwardKeys(c);
  let refs: { r64: SeqTensors[]; r32: SeqTensors[] } | undefined;
  const judge = async (configuration: string | null): Promise<Judgement> => {
    const t0 = performance.now();
    const reply = which === "forward" ? await s.forward(c, key, configuration) : await s.backward(c, key, configuration);
    const kernelMs = performance.now() - t0;
    const kernel = readReply(c, reply, keys, "kernel", which);
    // the references once per case, after the kernel's first call (a kernel that fails at once never needs them)
    refs ??= await references(s, decl, key, c, p, keys, which);
    const items = comparedItems(kernel, refs.r64, refs.r32, c.frozen, "py", false);
    const outcome = flashCompare(items, exercised, `${s.backend.module}:${s.backend.callable}`, p,
      // the shape-dependent output mutations assume sequences of one length T: none for a packed batch
      // the output mutations (the judge's own power) once per case, under the default
      { ...(c.packed === null ? { layout: { B: c.B, H: c.H, T: c.T } } : {}), ...(configuration === null ? {} : { mutations: false }) });
    return { outcome: withPlausibility(outcome, items, s.info.interpreted === true), kernelMs };
  };
  return acrossConfigurations(configs, () => s.lastReply, judge);
}

async function references(s: KernelSession, decl: RuleDecl, key: string, c: PyCase, p: Precision, keys: TensorKey[], which: "forward" | "backward") {
  // a packed batch's sequence is judged against the reference run on that sequence alone (docs/spec/py-backend.md#packed)
  const r64 = c.seqs.map((_, n) => toKernelGrads(c, n, ref64(decl, c, n)));
  const r32 = await s.plainReference(c, key, p, keys, r64);
  if (which === "backward") {
    for (const k of keys) {
      if (k.part === "dState0" && r64[0]!.dState0[k.name] === undefined) throw new Error(`the reference backward of ${key} returns no gradient of the state ${k.name}`);
    }
  }
  return { r64, r32 };
}

export const forwardCase = (s: KernelSession, decl: RuleDecl, key: string, c: PyCase, exercised: Set<string>, p: Precision, configs = new ConfigTally()): Promise<CaseOutcome> =>
  phaseCase(s, decl, key, c, exercised, p, "forward", configs);
export const backwardCase = (s: KernelSession, decl: RuleDecl, key: string, c: PyCase, exercised: Set<string>, p: Precision, configs = new ConfigTally()): Promise<CaseOutcome> =>
  phaseCase(s, decl, key, c, exercised, p, "backward", configs);
