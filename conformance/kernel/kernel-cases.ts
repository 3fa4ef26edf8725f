/**
 * One generated case of a py: forward or backward check (docs/spec/py-backend.md#forward-check,
 * #backward-check): the kernel's tensors against ref64 under the flash-attention bound, per tensor
 * and sequence (oracle/kernel-judge.ts), as every backend's phase case is judged
 * (cases/kernel-phase.ts); what is a py: backend's own is passed in: the Python request, the
 * references in the kernel's parametrisation, the yardstick, the configurations, the dump.
 *
 * ref64 is the TypeScript reference pair in f64: forward (y, every final state) and backward given
 * dy AND a random non-zero d(final state) (every input gradient, and dState0, the initial
 * state's). ref32, the yardstick of the bound and the bias test, is the plain reference at the
 * kernel's precision: the PyTorch reference run in f32 (forward and autograd backward), its outputs
 * rounded to the kernel's storage and state dtypes (docs/spec/py-backend.md#reference, #precision).
 */
import type { CaseOutcome } from "../../harness/check.ts";
import type { Precision } from "../../src/precision.ts";
import type { RuleDecl } from "../../src/rules/types.ts";
import { CaseDump } from "../../harness/dump.ts";
import type { Compared } from "../../oracle/kernel-judge.ts";
import { kernelLabel, tensorName, type KernelNames, type TensorKey } from "../../cases/kernel-tensors.ts";
import type { SeqTensors } from "../../oracle/kernel-case.ts";
import { toKernelGrads, type PyCase } from "./cases.ts";
import type { KernelSession } from "./kernel-session.ts";
import { backwardKeys, forwardKeys, pythonBackend } from "./python-backend.ts";
import { phaseVerdict, type PhaseReferences } from "../../cases/kernel-phase.ts";
import type { ProbeTally } from "../../ffi/hazards.ts";
import { acrossConfigurations, ConfigTally, type Judgement } from "./configurations.ts";
import { withPlausibility } from "./plausible.ts";
import { tf32Yardstick } from "./tf32-yardstick.ts";

export const forwardNames = (c: PyCase): string[] => forwardKeys(c).map((k) => tensorName(k, c.frozen, "py"));
export const backwardNames = (c: PyCase): string[] => backwardKeys(c).map((k) => tensorName(k, c.frozen, "py"));

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
  // the references once per case, after the kernel's first call (a kernel that fails at once never needs them)
  const cache: { refs?: PhaseReferences } = {};
  const judge = async (configuration: string | null): Promise<Judgement> => {
    const dumping = dump !== undefined && configuration === null;
    let kernelMs = 0;
    const outcome = await phaseVerdict({
      decl, frozen: c.frozen, seqs: c.seqs, cfg: c.cfg, exercised, precision: p, style: "py", all: false, cache,
      run: async () => {
        if (dumping) {
          s.onExchange = (op, sent, got) => {
            for (const [n, t] of sent) dump.tensor(`kernel/sent/${fileName(n)}.npy`, t.shape, t.data, `${op}: ${n} as sent to the kernel (in its parametrisation and layout)`);
            for (const [n, t] of got) dump.tensor(`kernel/returned/${fileName(n)}.npy`, t.shape, t.data, `${op}: ${n} as the kernel returned it`);
          };
        }
        const t0 = performance.now();
        try {
          const batch = { c, rule: key, configuration };
          return which === "forward" ? await backend.forward(batch) : await backend.backward(batch);
        } finally {
          s.onExchange = null;
          kernelMs = performance.now() - t0;
        }
      },
      afterRun: (run) => probes?.add(run.rerunMaxRel),
      // a packed batch's sequence is judged against the reference run on that sequence alone (docs/spec/py-backend.md#packed)
      reference: { phases: "both" },
      toKernel: (n, r) => toKernelGrads(c, n, r),
      yardstick: (r64) => yardstick(s, decl, key, c, p, keys, which, r64),
      labels: (k, ours) => kernelLabel(k, ours, names),
      who: `${s.backend.module}:${s.backend.callable}`,
      // the shape-dependent output mutations assume sequences of one length T: none for a packed batch;
      // the output mutations (the judge's own power) once per case, under the default
      options: { ...(c.packed === null ? { layout: { B: c.B, H: c.H, T: c.T } } : {}), ...(configuration === null ? {} : { mutations: false }) },
      onItems: (items) => {
        if (dumping) dumpCase(dump, c, items);
      },
      judged: (v, items) => withPlausibility(v, items, s.info.interpreted === true),
    });
    return { outcome, kernelMs };
  };
  return acrossConfigurations(configs, () => s.lastReply, judge);
}

/** The yardstick the declaration names: the TF32 plain reference, else PyTorch's at the kernel's precision. */
async function yardstick(s: KernelSession, decl: RuleDecl, key: string, c: PyCase, p: Precision, keys: TensorKey[], which: "forward" | "backward", r64: readonly SeqTensors[]) {
  const r32 = p.accumulate === "tf32" ? tf32Yardstick(decl, c, p, r64) : await s.plainReference(c, key, p, keys, r64);
  if (which === "backward") {
    for (const k of keys) {
      if (k.part === "dState0" && r64[0]!.dState0[k.name] === undefined) throw new Error(`the reference backward of ${key} returns no gradient of the state ${k.name}`);
    }
  }
  return r32;
}

export const pyForwardCase = (s: KernelSession, decl: RuleDecl, key: string, c: PyCase, exercised: Set<string>, p: Precision, configs = new ConfigTally(), probes?: ProbeTally, dump?: CaseDump): Promise<CaseOutcome> =>
  pyPhaseCase(s, decl, key, c, exercised, p, "forward", configs, probes, dump);
export const pyBackwardCase = (s: KernelSession, decl: RuleDecl, key: string, c: PyCase, exercised: Set<string>, p: Precision, configs = new ConfigTally(), probes?: ProbeTally, dump?: CaseDump): Promise<CaseOutcome> =>
  pyPhaseCase(s, decl, key, c, exercised, p, "backward", configs, probes, dump);
