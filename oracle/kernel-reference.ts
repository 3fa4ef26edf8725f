/**
 * The one reference path of a kernel case (docs/spec/kernel-abi.md#kernel-backends): one sequence
 * through the rule's reference pair as the judge runs it (oracle/matrix-fast.ts judgePair), or its
 * frozen read, or the chunk-start GD form a pair declares, in the dtype of the tensors it is given. ref64 of every kernel check (C5 on a native
 * library or a py: kernel, C6's kernel fixtures) and the plain reference's runs
 * (oracle/plain-reference.ts) are this function; they differ only in what they feed it.
 */
import { gradInput, type GradName } from "../ffi/abi.ts";
import type { InnerPair, RuleConfig, RuleDecl } from "../src/rules/types.ts";
import { Tensor, zeros } from "../src/tensor.ts";
import { chunkGdReferenceBackward, chunkGdReferenceForward } from "./chunk-gd-reference.ts";
import type { PairCase, SeqTensors } from "./kernel-case.ts";
import { judgePair } from "./matrix-fast.ts";

/** Which phases a run computes: the forward's y and final state, the backward's gradients, or both. */
export type Phases = "forward" | "backward" | "both";

export interface ReferenceOptions {
  /** Chunk-start GD at this chunk size (a pair that declares that form, docs/spec/kernel-abi.md#chunk-form); null or absent: the rule itself. */
  readonly gdC?: number | null;
  /** dy is NULL: the backward runs with dy = 0. */
  readonly dyNull?: boolean;
  /** d(final state) is NULL: the backward runs without it. */
  readonly dFinalNull?: boolean;
}

const data = (rec: Readonly<Record<string, Tensor>>): Record<string, ArrayLike<number>> =>
  Object.fromEntries(Object.entries(rec).map(([n, t]) => [n, t.data]));

/**
 * One sequence of a kernel case through the reference: y and (active) the final state when
 * `phases` has the forward; every input gradient (by input name) and d(initial state) when it has
 * the backward, given dy and d(final state) (absent = zero). A frozen read gives y, dq and
 * d(read state).
 */
export function referenceRun(decl: RuleDecl, frozen: boolean, c: PairCase, cfg: RuleConfig, phases: Phases, o: ReferenceOptions = {}): SeqTensors {
  const fwd = phases !== "backward", bwd = phases !== "forward";
  const dy = o.dyNull ? zeros(c.dy.dtype, c.dy.shape) : c.dy;
  const dFinal = o.dFinalNull ? undefined : c.dFinal;
  const out: SeqTensors = { state: {}, grads: {}, dState0: {} };
  if (frozen) {
    const fz = decl.frozen!;
    const f = fz.forward(c.inputs.q, c.state, cfg);
    if (fwd) out.y = f.y.data;
    if (bwd) {
      const g = fz.backward(f.saved, c.inputs.q, dy, cfg);
      out.grads.q = g.dq.data;
      out.dState0 = data(g.dState);
    }
    return out;
  }
  if (o.gdC !== undefined && o.gdC !== null) {
    const f = fwd ? chunkGdReferenceForward(decl, c.inputs, c.state, cfg, o.gdC) : null;
    const b = bwd ? chunkGdReferenceBackward(decl, c.inputs, c.state, cfg, o.gdC, dy, dFinal) : null;
    return { ...(f?.y !== undefined ? { y: f.y } : {}), state: f?.state ?? {}, grads: b?.grads ?? {}, dState0: b?.dState0 ?? {} };
  }
  // the judge's pair: a rule's fast pair where it has one, bit for bit the reference pair (docs/spec/precision.md#fast-pair)
  const pair: InnerPair<string> = judgePair(decl);
  const f = pair.forward(c.inputs, c.state, cfg);
  if (fwd) {
    out.y = f.y.data;
    out.state = data(f.finalState);
  }
  if (bwd) {
    const { dState0, ...byGrad } = pair.backward(f.saved, c.inputs, dy, cfg, dFinal);
    for (const [n, t] of Object.entries(byGrad)) if (t instanceof Tensor) out.grads[gradInput(n as GradName)] = t.data;
    out.dState0 = data(dState0 ?? {});
  }
  return out;
}
