/**
 * A `py:<module>:<callable>` kernel pair as a kernel backend (cases/kernel-backend.ts,
 * docs/spec/kernel-abi.md#kernel-backends): its declaration is the kernel's `nlc` dict as the
 * kernel host read it (kernel_load's reply), and forward and backward are requests to the kernel
 * host in the canonical layout (python/PROTOCOL.md), each under the hazard probes, the reply split
 * per sequence. Its isolation is the kernel host process (restarted on the next request after a
 * death or a timeout; python/session.ts) inside the backend's child process (child.ts python).
 */
import type { KernelBackend, KernelDeclaration, KernelRun } from "../../../cases/kernel-backend.ts";
import type { TensorKey } from "../../../cases/kernel-tensors.ts";
import type { PyCase } from "./canonical-case.ts";
import { kernelPrecision, readReply, type KernelReply, type KernelSession } from "./session.ts";

/** One request: the case in the canonical layout, the rule, and the kernel configuration (null: its default; docs/spec/py-backend.md#configurations). */
export interface PyBatch {
  readonly c: PyCase;
  readonly rule: string;
  readonly configuration: string | null;
}

/** The tensors a forward returns and a forward check compares: y and (active pairs) every final state. */
export function forwardKeys(c: PyCase): TensorKey[] {
  return [{ part: "y" }, ...(c.frozen ? [] : c.stateNames.map((name): TensorKey => ({ part: "state", name })))];
}

/** The tensors a backward returns and a backward check compares: every input's gradient (but a per-head gate's) and the state's. */
export function backwardKeys(c: PyCase): TensorKey[] {
  return [...c.kernelInputs.filter((n) => !c.perHead.includes(n)).map((name): TensorKey => ({ part: "grad", name })), ...c.stateNames.map((name): TensorKey => ({ part: "dState0", name }))];
}

/** What the kernel declares for a rule variant (a py: kernel declares one precision and no chunk form: it is judged as the sequential rule). */
export function pythonDeclaration(s: KernelSession, rule: string): KernelDeclaration {
  const who = `${s.backend.module}:${s.backend.callable}`;
  const p = kernelPrecision(s.info);
  const skip = !s.info.judged ? s.info.skip_reason ?? "not judged"
    : !s.info.rules.includes(rule) ? `${rule} is not implemented by ${who} (it declares ${s.info.rules.join(", ")})`
    : null;
  return {
    skip, undeclared: s.info.judged && !s.info.rules.includes(rule), precision: { forward: p, backward: p }, chunkSizes: s.info.chunk_sizes ?? null, chunkForm: { kind: "sequential", C: 0 },
    varlen: (s.info.varlen ?? null) !== null, forwardOnly: s.info.backward === "none",
  };
}

/** A reply as the contract's run: per sequence the phase's tensors, unless a hazard probe found something (then none are read). */
function asRun(c: PyCase, reply: KernelReply, which: "forward" | "backward", who: string): KernelRun {
  const rerun = { runs: reply.runs, ...(reply.rerunMaxRel !== undefined ? { rerunMaxRel: reply.rerunMaxRel } : {}) };
  if (reply.hazards.length > 0) return { perSeq: [], hazards: reply.hazards, who, ...rerun };
  return { perSeq: readReply(c, reply.tensors, which === "forward" ? forwardKeys(c) : backwardKeys(c), "kernel", which), hazards: [], who, ...rerun };
}

/** An open kernel session as a kernel backend. */
export function pythonBackend(s: KernelSession): KernelBackend<PyBatch, false> {
  const who = `${s.backend.module}:${s.backend.callable}`;
  return {
    name: s.backend.name, kind: "python",
    probe: () => s.info.judged
      ? { available: true, device: s.info.device, ...(s.info.toolchain !== undefined ? { toolchain: s.info.toolchain } : {}) }
      : { available: false, reason: s.info.skip_reason ?? "not judged", broken: false },
    declare: (rule) => pythonDeclaration(s, rule),
    forward: async (b) => asRun(b.c, await s.forward(b.c, b.rule, b.configuration), "forward", who),
    backward: async (b) => asRun(b.c, await s.backward(b.c, b.rule, b.configuration), "backward", who),
    close: () => s.close(),
  };
}
