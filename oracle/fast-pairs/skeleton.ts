/**
 * The skeleton of the judge's fast pairs of the rules after Delta (docs/spec/precision.md#fast-pair-new-rules):
 * KDA, Comba, DPLR, Gated DeltaProduct, Hebbian, GLA, RWKV-6, GDN2 and gated Oja, each a rule's fused row loops in a module of its own
 * (oracle/fast-pairs/<rule>.ts), run here over flat typed arrays as oracle/matrix-fast.ts runs Delta's
 * and Gated Delta's. The same contract: not a second reference, but the reference pair bit for bit —
 * every sum in the reference's order (natural or reversed), every store into an array of the
 * reference's dtype (the storage dtype, or the accumulator's: f32 under f32 sums), every zero term the
 * reference skips skipped. Under random rounding and TF32 products (the reference's products take TF32
 * operands there, these loops do not) they hand the call to the reference pair.
 * tests/matrix-fast-aux.test.ts compares them bitwise on random cases and plants one wrong term in each.
 *
 * A rule's loops are compiled once per storage dtype and summation mode from their source text, the
 * mode written in as literals. Per token one pass over the state's rows in the forward (the read, the
 * decay, the write and y of a row together) and one in the backward: every backward quantity of row i
 * needs row i of the adjoint D, of M_t and of M_{t+1} and the token's vectors, except the per-channel
 * decay's column sums (KDA's and DPLR's dα), which the reference sums over the rows in the natural
 * order whatever the summation order: in the reversed order they take a second pass. The state
 * history is kept as checkpoints every CHECKPOINT_EVERY_AUX tokens and replayed stretch by stretch
 * from the saved errors (KDA, Comba, Gated DeltaProduct, GDN2, gated Oja: e_t) or reads (DPLR: u_t = M_t a_t), which
 * need no sum, so the replay is exact; the linear-attention writes v_t k_tᵀ need nothing saved.
 */
import { accumulatesInF32, productsInTF32, roundsRandomly, sumsReversed } from "../../src/precision.ts";
import type { InnerGrads, InnerInputs, InnerPair, RuleConfig, RuleDecl, State } from "../../src/rules/types.ts";
import { Tensor, alloc, type Data } from "../../src/tensor.ts";

/**
 * A rule's loops, as its loops function returns them. S is the vector the forward saves per token
 * for the replay; the forms without steps ignore the arguments after their own (n_h, the states
 * between the steps).
 */
export interface Loops {
  accBuffer(n: number): Data;
  /** Tokens t0 ≤ t < t1: M holds M_{t0} at 0 and receives M_{t+1} at (t − t0 + 1)·d². */
  forward(X: Data[], M: Data, S: Data, Y: Data, d: number, t0: number, t1: number, nh: number): void;
  replay(X: Data[], S: Data, M: Data, d: number, t0: number, t1: number, nh: number, between: Data): void;
  backward(X: Data[], S: Data, M: Data, DY: Data, D: Data, d: number, t0: number, t1: number, G: Data[], nh: number, between: Data): void;
}

/**
 * What a fast pair is made of: the loops' source, the inputs in the order the loops take them, the
 * vector the forward saves for the replay (none where the write needs no sum), and the gradients in the order the loops write them,
 * each with its length in tokens (token: [s]), token rows (row: [s, d]) or, for a rule with n_h
 * steps per token (`steps`), step values (step: [s, n_h]) and step rows (stepRow: [s, n_h·d]).
 */
export interface FastForm {
  readonly name: string;
  readonly loops: () => Loops;
  readonly inputs: readonly (keyof InnerInputs)[];
  readonly saved?: "e" | "u";
  readonly grads: readonly (readonly [keyof InnerGrads, GradWidth])[];
  /** The steps per token, from the rule's config (Gated DeltaProduct's n_h); absent: one. */
  readonly steps?: (cfg: RuleConfig) => number;
}
export type GradWidth = "token" | "row" | "step" | "stepRow";

/**
 * Tokens between two kept states: the value of oracle/matrix-fast.ts's CHECKPOINT_EVERY (memory
 * (T/C + C)·d² instead of (T + 1)·d²; tests/matrix-fast-aux.test.ts checks the two agree).
 */
export const CHECKPOINT_EVERY_AUX = 32;

/**
 * The fast pair of `decl` in the form `form`. `edit` rewrites the loops' source text before they
 * are compiled: the tests plant a wrong term that way (absent: the loops as written).
 */
export function auxFastPair(decl: RuleDecl, form: FastForm, edit: (source: string) => string = (s) => s): InnerPair<string> {
  const copies = new Map<string, Loops>();
  const loopsFor = (dtype: "f64" | "f32", d: number): Loops => {
    const acc32 = accumulatesInF32(), rev = sumsReversed(), even = d % 2 === 0;
    const key = `${form.name} ${dtype}${acc32 ? " acc-f32" : ""}${rev ? " reversed" : ""}${even ? " even d" : ""}`;
    let c = copies.get(key);
    if (c === undefined) {
      const literal: Record<string, boolean> = { MODE_ACC32: acc32, MODE_REV: rev, MODE_EVEN: even };
      const body = edit(form.loops.toString()).replace(/\bMODE_(ACC32|REV|EVEN)\b/g, (name) => String(literal[name]));
      c = new Function(`"use strict"; // ${key} loops\nreturn (${body})();`)() as Loops;
      copies.set(key, c);
    }
    return c;
  };
  const data = (inp: InnerInputs) => form.inputs.map((n) => {
    const t = inp[n] as Tensor | undefined;
    if (t === undefined) throw new Error(`${decl.key} fast pair: input ${String(n)} missing`);
    return t.data;
  });
  return {
    // not the reference's saved tensors: handing them to the reference pair fails loudly
    saved: ["checkpoints", ...(form.saved === undefined ? [] : [form.saved])],
    forward(inp: InnerInputs, state: State, cfg) {
      if (roundsRandomly() || productsInTF32()) return decl.inner.forward(inp, state, cfg);
      const { d, seq_len: s } = cfg;
      const dt = inp.k.dtype, dd = d * d, C = CHECKPOINT_EVERY_AUX, nh = form.steps?.(cfg) ?? 1;
      const loops = loopsFor(dt, d), X = data(inp);
      const segments = Math.max(1, Math.ceil(s / C));
      const checkpoints = alloc(dt, segments * dd);
      const work = alloc(dt, (Math.min(C, s) + 1) * dd);
      work.set(state.M!.data);
      const sv = alloc(dt, form.saved === undefined ? 0 : s * nh * d), y = alloc(dt, s * d);
      for (let g = 0; g < segments; g++) {
        const t0 = g * C, t1 = Math.min(s, t0 + C);
        checkpoints.set(work.subarray(0, dd), g * dd);
        loops.forward(X, work, sv, y, d, t0, t1, nh);
        work.copyWithin(0, (t1 - t0) * dd, (t1 - t0 + 1) * dd);
      }
      return {
        y: new Tensor(dt, [s, d], y),
        finalState: { M: new Tensor(dt, [d, d], work.slice(0, dd)) },
        saved: { checkpoints: new Tensor(dt, [segments, d, d], checkpoints), ...(form.saved === undefined ? {} : { [form.saved]: new Tensor(dt, [s, nh * d], sv) }) },
      };
    },
    backward(saved, inp, dy, cfg, dFinal) {
      if (roundsRandomly() || productsInTF32()) return decl.inner.backward(saved, inp, dy, cfg, dFinal);
      const { d, seq_len: s } = cfg;
      const dt = inp.k.dtype, dd = d * d, C = CHECKPOINT_EVERY_AUX, nh = form.steps?.(cfg) ?? 1;
      const shapeOf = (w: GradWidth): number[] => (w === "token" ? [s] : w === "row" ? [s, d] : w === "step" ? [s, nh] : [s, nh * d]);
      const sizeOf = (w: GradWidth) => shapeOf(w).reduce((a, b) => a * b, 1);
      const loops = loopsFor(dt, d), X = data(inp);
      const D = loops.accBuffer(dd);
      const g0 = dFinal?.M;
      if (g0 !== undefined) {
        if (g0.size !== dd) throw new Error(`dFinal.M: ${g0.size} elements, the state has ${dd}`);
        D.set(g0.data);
      }
      const cp = saved.checkpoints!.data, sv = form.saved === undefined ? alloc(dt, 0) : saved[form.saved]!.data;
      const segments = cp.length / dd;
      const work = alloc(dt, (Math.min(C, s) + 1) * dd);
      // a segment's states between the steps (n_h ≥ 2), kept by the replay for the backward
      const between = alloc(dt, Math.min(C, s) * (nh - 1) * dd);
      const G = form.grads.map(([, per]) => alloc(dt, sizeOf(per)));
      for (let g = segments - 1; g >= 0; g--) {
        const t0 = g * C, t1 = Math.min(s, t0 + C);
        work.set(cp.subarray(g * dd, (g + 1) * dd));
        loops.replay(X, sv, work, d, t0, t1, nh, between);
        loops.backward(X, sv, work, dy.data, D, d, t0, t1, G, nh, between);
      }
      const dM0 = alloc(dt, dd);
      for (let i = 0; i < dd; i++) dM0[i] = D[i]!;
      const out: Record<string, unknown> = { dState0: { M: new Tensor(dt, [d, d], dM0) } };
      form.grads.forEach(([name, per], n) => { out[name] = new Tensor(dt, shapeOf(per), G[n]!); });
      return out as InnerGrads;
    },
  };
}
