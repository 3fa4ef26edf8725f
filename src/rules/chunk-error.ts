/**
 * Chunk-start GD of the error-writing matrix rules, Delta and Titans (matrixChunk.write = "error";
 * docs/spec/chunk-forms.md#chunk-start-gd), written in the rules' own arithmetic: the error
 * e_t = M_c k_t − v_t reads the state of the chunk's first token; retention (and Titans' momentum)
 * run on the running state. With C = 1 it is the rule bit for bit, in f64 and in f32 — which is
 * why it exists beside the tape form of src/rules/chunk-matrix.ts: a kernel declaring chunk-start
 * GD is judged against a plain f32 reference that rounds where the rule rounds
 * (docs/spec/kernel-abi.md#chunk-form). The tape form stays the independent oracle of this one
 * (check C1/chunk-gd/<rule>/tape). The backward is hand-written and exact: the error's adjoint
 * w.r.t. M_c collects in F, which joins the running adjoint at the chunk's first token.
 */
import { accBuffer } from "../precision.ts";
import * as K from "../numeric.ts";
import { Tensor, alloc, type Data } from "../tensor.ts";
import { adjointFrom } from "./state-grad.ts";
import { titansScratch, titansTokenBackward, titansWrite } from "./titans.ts";
import type { InnerInputs, RuleConfig, RuleDecl, State } from "./types.ts";
import { checkChunkSize, chunkStart } from "./chunk-start.ts";

export function hasErrorChunk(decl: RuleDecl): boolean {
  return decl.matrixChunk?.write === "error";
}

export interface ErrorChunkForward {
  y: Tensor;
  finalState: State;
  /** M_0..M_s (and S_0..S_s with momentum) and the errors e_t. */
  M: Data; S: Data | null; e: Data;
}

export function errorChunkStartGd(decl: RuleDecl, inp: InnerInputs, state: State, cfg: RuleConfig, C: number): ErrorChunkForward {
  checkChunkSize(C);
  if (!hasErrorChunk(decl)) throw new Error(`rule '${decl.key}' does not write its prediction error`);
  const momentum = decl.matrixChunk!.momentum;
  const { k, v, q, alpha, theta, eta } = inp;
  const { d, seq_len: s } = cfg;
  const dt = k.dtype, dd = d * d;
  const M = alloc(dt, (s + 1) * dd);
  M.set(state.M!.data);
  const S = momentum ? alloc(dt, (s + 1) * dd) : null;
  if (S !== null) S.set(state.S!.data);
  const e = alloc(dt, s * d), y = alloc(dt, s * d);
  const sNext = accBuffer(dd);
  for (let t = 0; t < s; t++) {
    const mt = t * dd, mn = (t + 1) * dd, mc = chunkStart(t, C) * dd, o = t * d;
    K.matvec(M, mc, d, d, k.data, o, e, o);
    for (let i = 0; i < d; i++) e[o + i]! -= v.data[o + i]!;
    const a = alpha!.data[t]!, th = theta!.data[t]!;
    if (S === null) {
      // Delta's order: (1−α)M_t rounded, then the outer product added
      for (let i = 0; i < dd; i++) M[mn + i] = (1 - a) * M[mt + i]!;
      K.addOuter(M, mn, d, d, -th, e, o, k.data, o);
    } else {
      titansWrite(M, S, t, d, e, k.data, a, th, eta!.data[t]!, sNext);
    }
    K.matvec(M, mn, d, d, q.data, o, y, o);
  }
  const finalState: State = S === null
    ? { M: new Tensor(dt, [d, d], M.slice(s * dd)) }
    : { M: new Tensor(dt, [d, d], M.slice(s * dd)), S: new Tensor(dt, [d, d], S.slice(s * dd)) };
  return { y: new Tensor(dt, [s, d], y), finalState, M, S, e };
}

/** Exact backward for upstream dy and ∂L/∂(final M, S) (zero when absent), named by input and `state.<name>`. */
export function errorChunkStartGdBackward(fw: ErrorChunkForward, inp: InnerInputs, cfg: RuleConfig, C: number, dy: Tensor,
  dFinal?: State): Record<string, Float64Array> {
  const { d, seq_len: s } = cfg;
  const dd = d * d;
  const { M, S, e: Ev } = fw;
  const g = {
    dk: new Float64Array(s * d), dv: new Float64Array(s * d), dq: new Float64Array(s * d),
    dalpha: new Float64Array(s), dtheta: new Float64Array(s), deta: new Float64Array(s),
  };
  const D = adjointFrom(dFinal, "M", dd); // ∂L/∂M_{t+1}; after t = 0, ∂L/∂M_0
  const E = S === null ? null : adjointFrom(dFinal, "S", dd); // ∂L/∂S_{t+1}
  const F = accBuffer(dd); // ∂L/∂M_c through the errors of the current chunk
  const scratch = titansScratch(d);
  for (let t = s - 1; t >= 0; t--) {
    const f = chunkStart(t, C);
    titansTokenBackward(M, S, Ev, inp, dy, d, t, f, D, E, F, scratch, g);
    if (t === f) {
      for (let i = 0; i < dd; i++) D[i]! += F[i]!;
      F.fill(0);
    }
  }
  const { dk, dv, dq, dalpha, dtheta, deta } = g;
  const out: Record<string, Float64Array> = {
    k: dk, v: dv, q: dq, alpha: dalpha, theta: dtheta, "state.M": Float64Array.from(D),
  };
  if (E !== null) {
    out.eta = deta;
    out["state.S"] = Float64Array.from(E);
  }
  return out;
}
