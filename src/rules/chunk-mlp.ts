/**
 * Chunk-start GD for the MLP memories, Moneta, YAAD and MEMORA (docs/spec/chunk-forms.md#chunk-start-gd-mlp).
 *
 * The inner gradient (a, h, e, g, r, u of src/rules/mlp.ts) is taken at the state of the chunk's
 * first token W_c; each rule's retention still acts on the running state W_t token by token.
 * The forward performs each rule's own per-token arithmetic, so C = 1 is the rule bit for bit.
 * The backward is hand-written and exact for the chunked function: the inner-gradient chain
 * (chainIn / chainOut) sends its state adjoint to an accumulator F of the chunk start, which joins
 * the running adjoint when the backward reaches that token; the retention's adjoint goes to the
 * previous token as in the sequential rule. It also takes ∂L/∂(final state) and returns
 * ∂L/∂(initial state).
 */
import * as K from "../numeric.ts";
import { Tensor, alloc, type Data } from "../tensor.ts";
import { L2_BIAS, logc, logcPrime, memoraWrite, softmaxRowsVjpInPlace } from "./memora.ts";
import { MlpScratch, chainIn, chainOut, dHidden, innerGradDot, innerGradient, mlpRead, readVjp, type Bias } from "./mlp.ts";
import { isL2, lpBias, lqNormalize, lqNormalizeVjpAdd } from "./moneta.ts";
import { huber } from "./yaad.ts";
import type { InnerInputs, RuleConfig, RuleDecl, State } from "./types.ts";
import { checkChunkSize, chunkStart } from "./chunk-start.ts";

export const MLP_CHUNK_RULES = ["moneta", "yaad", "memora"] as const;

export function hasMlpChunk(decl: RuleDecl): boolean {
  return (MLP_CHUNK_RULES as readonly string[]).includes(decl.key);
}

/** The retention of each rule, in the rule's own parameters. */
interface Retention {
  readonly kind: "moneta" | "yaad" | "memora";
  readonly bias: Bias;
  /** Moneta: λ₂ and the L_q exponent; YAAD: λ_loc and λ₂. */
  readonly l2: number;
  readonly lLoc: number;
  readonly lq: number;
}

function retentionOf(decl: RuleDecl, cfg: RuleConfig): Retention {
  switch (decl.key) {
    case "moneta": return { kind: "moneta", bias: lpBias(Number(cfg.p), Number(cfg.sign_sharpness)), l2: Number(cfg.lambda_2), lLoc: 0, lq: Number(cfg.q) };
    case "yaad": return { kind: "yaad", bias: huber(Number(cfg.delta)), l2: Number(cfg.lambda_2), lLoc: Number(cfg.lambda_local), lq: 2 };
    case "memora": return { kind: "memora", bias: L2_BIAS, l2: 0, lLoc: 0, lq: 2 };
    default: throw new Error(`rule '${decl.key}' has no MLP chunk-start GD form`);
  }
}

export interface MlpChunkForward {
  y: Tensor;
  finalState: State;
  /** States W_0..W_s (and Moneta's accumulators A_0..A_s off the L2 path). */
  W1: Data; W2: Data; A1: Data; A2: Data;
}

/** Chunk-start GD forward with chunks of C tokens. */
export function mlpChunkStartGd(decl: RuleDecl, inp: InnerInputs, state: State, cfg: RuleConfig, C: number): MlpChunkForward {
  checkChunkSize(C);
  const ret = retentionOf(decl, cfg);
  const { d, seq_len: s } = cfg, dh = dHidden(cfg);
  const { k, v, q, alpha, theta } = inp;
  const dt = k.dtype, n1 = dh * d, n2 = d * dh;
  const W1 = alloc(dt, (s + 1) * n1), W2 = alloc(dt, (s + 1) * n2);
  W1.set(state.W1!.data);
  W2.set(state.W2!.data);
  const lqPath = ret.kind === "moneta" && !isL2(ret.lq);
  const A1 = lqPath ? alloc(dt, (s + 1) * n1) : W1, A2 = lqPath ? alloc(dt, (s + 1) * n2) : W2;
  if (lqPath) {
    A1.set(state.W1!.data);
    A2.set(state.W2!.data);
  }
  const sc = new MlpScratch(dt, d, dh);
  const Z = new Float64Array(Math.max(d, dh));
  const y = alloc(dt, s * d);
  for (let t = 0; t < s; t++) {
    const o = t * d, c1 = t * n1, c2 = t * n2, x1 = c1 + n1, x2 = c2 + n2;
    const f = chunkStart(t, C), f1 = f * n1, f2 = f * n2;
    const al = alpha!.data[t]!, th = theta!.data[t]!;
    if (ret.kind === "memora") {
      // Read before the write; Z = α logc(W_t) − θ G(W_c), row softmax.
      mlpRead(sc, W1, c1, W2, c2, q.data, o, y, o);
      innerGradient(sc, W1, f1, W2, f2, k.data, v.data, o, ret.bias);
      memoraWrite(sc, W1, c1, x1, W2, c2, x2, k.data, o, al, th, d, dh, Z);
      continue;
    }
    innerGradient(sc, W1, f1, W2, f2, k.data, v.data, o, ret.bias);
    if (ret.kind === "yaad") {
      for (let i = 0; i < dh; i++) {
        const ui = sc.u[i]!;
        for (let j = 0; j < d; j++) {
          const ij = i * d + j, w = W1[c1 + ij]!;
          W1[x1 + ij] = al * w - th * (ui * k.data[o + j]! + 2 * ret.lLoc * (w - W1[ij]!) + 2 * ret.l2 * w);
        }
      }
      for (let i = 0; i < d; i++) {
        const gi = sc.g[i]!;
        for (let j = 0; j < dh; j++) {
          const ij = i * dh + j, w = W2[c2 + ij]!;
          W2[x2 + ij] = al * w - th * (gi * sc.h[j]! + 2 * ret.lLoc * (w - W2[ij]!) + 2 * ret.l2 * w);
        }
      }
    } else {
      for (let i = 0; i < dh; i++) {
        const ui = sc.u[i]!;
        for (let j = 0; j < d; j++) {
          const ij = i * d + j;
          A1[x1 + ij] = al * A1[c1 + ij]! - th * (ui * k.data[o + j]! + 2 * ret.l2 * W1[c1 + ij]!);
        }
      }
      for (let i = 0; i < d; i++) {
        const gi = sc.g[i]!;
        for (let j = 0; j < dh; j++) {
          const ij = i * dh + j;
          A2[x2 + ij] = al * A2[c2 + ij]! - th * (gi * sc.h[j]! + 2 * ret.l2 * W2[c2 + ij]!);
        }
      }
      if (lqPath) {
        lqNormalize(A1, x1, n1, ret.lq, W1, x1);
        lqNormalize(A2, x2, n2, ret.lq, W2, x2);
      }
    }
    mlpRead(sc, W1, x1, W2, x2, q.data, o, y, o);
  }
  return {
    y: new Tensor(dt, [s, d], y),
    finalState: { W1: new Tensor(dt, [dh, d], W1.slice(s * n1)), W2: new Tensor(dt, [d, dh], W2.slice(s * n2)) },
    W1, W2, A1, A2,
  };
}

export interface MlpChunkGrads {
  dk: Float64Array; dv: Float64Array; dq: Float64Array; dalpha: Float64Array; dtheta: Float64Array;
  dW1: Float64Array; dW2: Float64Array;
}

/** Exact backward of mlpChunkStartGd for upstream dy and ∂L/∂(final W1, W2) (zero when absent). */
export function mlpChunkStartGdBackward(decl: RuleDecl, fw: MlpChunkForward, inp: InnerInputs, state: State, cfg: RuleConfig,
  C: number, dy: Tensor, dFinal?: State): MlpChunkGrads {
  const ret = retentionOf(decl, cfg);
  const { d, seq_len: s } = cfg, dh = dHidden(cfg);
  const { k, v, q, alpha, theta } = inp;
  const dt = k.dtype, n1 = dh * d, n2 = d * dh;
  const { W1, W2, A1, A2 } = fw;
  const lqPath = ret.kind === "moneta" && !isL2(ret.lq);
  const g: MlpChunkGrads = {
    dk: new Float64Array(s * d), dv: new Float64Array(s * d), dq: new Float64Array(s * d),
    dalpha: new Float64Array(s), dtheta: new Float64Array(s), dW1: new Float64Array(n1), dW2: new Float64Array(n2),
  };
  // Hb = ∂L/∂(state after token t): W_{t+1}, or Moneta's A_{t+1} off the L2 path.
  let Hb1 = new Float64Array(n1), Hb2 = new Float64Array(n2);
  // F = ∂L/∂W_c through the inner gradients of the current chunk (c its first token).
  const F1 = new Float64Array(n1), F2 = new Float64Array(n2);
  let D1 = new Float64Array(n1), D2 = new Float64Array(n2);
  const R1 = new Float64Array(n1), R2 = new Float64Array(n2);
  // YAAD's boundary B = W_0 (every call): its adjoint joins the initial state's at the end.
  const B1 = new Float64Array(n1), B2 = new Float64Array(n2);
  if (dFinal !== undefined) {
    if (lqPath) {
      lqNormalizeVjpAdd(A1, s * n1, n1, ret.lq, Float64Array.from(dFinal.W1!.data), Hb1);
      lqNormalizeVjpAdd(A2, s * n2, n2, ret.lq, Float64Array.from(dFinal.W2!.data), Hb2);
    } else {
      Hb1.set(dFinal.W1!.data);
      Hb2.set(dFinal.W2!.data);
    }
  }
  const sc = new MlpScratch(dt, d, dh);
  for (let t = s - 1; t >= 0; t--) {
    const o = t * d, c1 = t * n1, c2 = t * n2, x1 = c1 + n1, x2 = c2 + n2;
    const f = chunkStart(t, C), f1 = f * n1, f2 = f * n2;
    const al = alpha!.data[t]!, th = theta!.data[t]!;
    if (ret.kind === "memora") {
      softmaxRowsVjpInPlace(W1, x1, dh, d, Hb1);
      softmaxRowsVjpInPlace(W2, x2, d, dh, Hb2);
      let da = 0;
      for (let i = 0; i < n1; i++) da += Hb1[i]! * logc(W1[c1 + i]!);
      for (let i = 0; i < n2; i++) da += Hb2[i]! * logc(W2[c2 + i]!);
      g.dalpha[t] = da;
      innerGradient(sc, W1, f1, W2, f2, k.data, v.data, o, ret.bias);
      chainIn(sc, Hb1, Hb2, k.data, o);
      g.dtheta[t] = -innerGradDot(sc);
      for (let i = 0; i < n1; i++) D1[i] = al * Hb1[i]! * logcPrime(W1[c1 + i]!);
      for (let i = 0; i < n2; i++) D2[i] = al * Hb2[i]! * logcPrime(W2[c2 + i]!);
      chainOut(sc, -th, W1, f1, W2, f2, k.data, o, F1, F2, ret.bias);
      g.dk.set(sc.dk, o);
      g.dv.set(sc.dv, o);
      readVjp(sc, W1, c1, W2, c2, q.data, dy.data, o, D1, D2);
      g.dq.set(sc.dq, o);
      [Hb1, D1] = [D1, Hb1];
      [Hb2, D2] = [D2, Hb2];
      if (t === f) joinChunkStart(Hb1, F1, Hb2, F2);
      continue;
    }
    // (read of W_{t+1})
    if (lqPath) {
      R1.fill(0);
      R2.fill(0);
      readVjp(sc, W1, x1, W2, x2, q.data, dy.data, o, R1, R2);
      lqNormalizeVjpAdd(A1, x1, n1, ret.lq, R1, Hb1);
      lqNormalizeVjpAdd(A2, x2, n2, ret.lq, R2, Hb2);
    } else {
      readVjp(sc, W1, x1, W2, x2, q.data, dy.data, o, Hb1, Hb2);
    }
    g.dq.set(sc.dq, o);
    innerGradient(sc, W1, f1, W2, f2, k.data, v.data, o, ret.bias);
    chainIn(sc, Hb1, Hb2, k.data, o);
    const hw = K.frob(Hb1, 0, W1, c1, n1) + K.frob(Hb2, 0, W2, c2, n2);
    if (ret.kind === "yaad") {
      // W_{t+1} = α W − θ (G + 2λ_loc (W − B) + 2λ₂ W)
      const hb = K.frob(Hb1, 0, W1, 0, n1) + K.frob(Hb2, 0, W2, 0, n2);
      g.dalpha[t] = hw;
      g.dtheta[t] = -(innerGradDot(sc) + 2 * ret.lLoc * (hw - hb) + 2 * ret.l2 * hw);
      const toB = 2 * ret.lLoc * th;
      for (let i = 0; i < n1; i++) B1[i]! += toB * Hb1[i]!;
      for (let i = 0; i < n2; i++) B2[i]! += toB * Hb2[i]!;
      const keep = al - th * (2 * ret.lLoc + 2 * ret.l2);
      for (let i = 0; i < n1; i++) Hb1[i]! *= keep;
      for (let i = 0; i < n2; i++) Hb2[i]! *= keep;
      chainOut(sc, -th, W1, f1, W2, f2, k.data, o, F1, F2, ret.bias);
      if (t === f) joinChunkStart(Hb1, F1, Hb2, F2);
    } else {
      // A_{t+1} = α A_t − θ (G + 2λ₂ W_t), W = N_q(A)
      g.dalpha[t] = K.frob(Hb1, 0, A1, c1, n1) + K.frob(Hb2, 0, A2, c2, n2);
      g.dtheta[t] = -(innerGradDot(sc) + 2 * ret.l2 * hw);
      chainOut(sc, -th, W1, f1, W2, f2, k.data, o, F1, F2, ret.bias);
      if (!lqPath) {
        const keep = al - 2 * ret.l2 * th;
        for (let i = 0; i < n1; i++) Hb1[i]! *= keep;
        for (let i = 0; i < n2; i++) Hb2[i]! *= keep;
        if (t === f) joinChunkStart(Hb1, F1, Hb2, F2);
      } else {
        // ∂L/∂W_t = −2λ₂θ Ā (+ F at the chunk start); Ā_t = α Ā + N_qᵀ(A_t)[∂L/∂W_t], W_0 itself at t = 0
        for (let i = 0; i < n1; i++) D1[i] = -2 * ret.l2 * th * Hb1[i]!;
        for (let i = 0; i < n2; i++) D2[i] = -2 * ret.l2 * th * Hb2[i]!;
        if (t === f) joinChunkStart(D1, F1, D2, F2);
        for (let i = 0; i < n1; i++) Hb1[i]! *= al;
        for (let i = 0; i < n2; i++) Hb2[i]! *= al;
        if (t > 0) {
          lqNormalizeVjpAdd(A1, c1, n1, ret.lq, D1, Hb1);
          lqNormalizeVjpAdd(A2, c2, n2, ret.lq, D2, Hb2);
        } else {
          // A_0 = W_0 = the given state: both adjoints reach it.
          for (let i = 0; i < n1; i++) Hb1[i]! += D1[i]!;
          for (let i = 0; i < n2; i++) Hb2[i]! += D2[i]!;
        }
      }
    }
    g.dk.set(sc.dk, o);
    g.dv.set(sc.dv, o);
  }
  for (let i = 0; i < n1; i++) g.dW1[i] = Hb1[i]! + B1[i]!;
  for (let i = 0; i < n2; i++) g.dW2[i] = Hb2[i]! + B2[i]!;
  void state;
  return g;
}

/** At a chunk's first token the inner gradients' adjoint F joins the running adjoint H; F restarts. */
function joinChunkStart(H1: Float64Array, F1: Float64Array, H2: Float64Array, F2: Float64Array): void {
  for (let i = 0; i < H1.length; i++) H1[i]! += F1[i]!;
  for (let i = 0; i < H2.length; i++) H2[i]! += F2[i]!;
  F1.fill(0);
  F2.fill(0);
}
