/**
 * Hebbian rule (docs/spec/titans-family.md#hebbian), read after write:
 *   M_{t+1} = (1 − α_t) M_t + v_t k_tᵀ ;  y_t = M_{t+1} q_t
 * Only the α gate; k and q stay raw (D1, §1.2). Frozen read: y_t = M q_t (§4.3, §6).
 */
import { accBuffer } from "../precision.ts";
import * as K from "../numeric.ts";
import { Rng } from "../rng.ts";
import { Tensor, alloc, zeros, type DType } from "../tensor.ts";
import { adjointFrom, gradTensor } from "./state-grad.ts";
import { matrixFrozenRead, randTensor, randomMatrixState, writeReadIdentity } from "./matrix.ts";
import type { InnerPair, RuleDecl } from "./types.ts";

export const hebbian: RuleDecl<"hebbian"> = {
  key: "hebbian",
  sheet: "docs/spec/titans-family.md#hebbian",
  hyper: {},
  projection: "memory",
  gates: ["alpha"],
  normalizeKQ: false,
  omega: false,
  stateShapes: ({ d }) => ({ M: [d, d] }),
  init: ({ d }, dtype) => ({ M: zeros(dtype, [d, d]) }),
  randomState: randomMatrixState(["M"]),
  inner: {
    saved: ["mStates"],
    forward({ k, v, q, alpha }, state, { d, seq_len: s }) {
      const dt = k.dtype, dd = d * d;
      const mStates = alloc(dt, (s + 1) * dd);
      mStates.set(state.M!.data);
      const y = alloc(dt, s * d);
      for (let t = 0; t < s; t++) {
        const mt = t * dd, mn = (t + 1) * dd, o = t * d;
        const a = alpha!.data[t]!;
        for (let i = 0; i < d; i++) {
          const vi = v.data[o + i]!, r = i * d;
          for (let j = 0; j < d; j++) mStates[mn + r + j] = (1 - a) * mStates[mt + r + j]! + vi * k.data[o + j]!;
        }
        K.matvec(mStates, mn, d, d, q.data, o, y, o);
      }
      return {
        y: new Tensor(dt, [s, d], y),
        finalState: { M: new Tensor(dt, [d, d], mStates.slice(s * dd)) },
        saved: { mStates: new Tensor(dt, [s + 1, d, d], mStates) },
      };
    },
    backward({ mStates }, { k, v, q, alpha }, dy, { d, seq_len: s }, dFinal) {
      const dt = k.dtype, dd = d * d;
      const M = mStates!.data;
      const dk = alloc(dt, s * d), dv = alloc(dt, s * d), dq = alloc(dt, s * d);
      const dalpha = alloc(dt, s);
      const D = adjointFrom(dFinal, "M", dd); // ∂L/∂M_{t+1}; after t = 0, ∂L/∂M_0
      const tmp = accBuffer(d);
      for (let t = s - 1; t >= 0; t--) {
        const mt = t * dd, mn = (t + 1) * dd, o = t * d;
        // read y_t = M_{t+1} q_t
        K.addOuter(D, 0, d, d, 1, dy.data, o, q.data, o);
        K.matTvec(M, mn, d, d, dy.data, o, tmp, 0);
        for (let j = 0; j < d; j++) dq[o + j] = tmp[j]!;
        dalpha[t] = -K.frob(D, 0, M, mt, dd);
        // write v kᵀ: dv = D k, dk = Dᵀ v
        K.matvec(D, 0, d, d, k.data, o, dv, o);
        K.matTvec(D, 0, d, d, v.data, o, tmp, 0);
        for (let j = 0; j < d; j++) dk[o + j] = tmp[j]!;
        const a = alpha!.data[t]!;
        for (let i = 0; i < dd; i++) D[i]! *= 1 - a;
      }
      return {
        dk: new Tensor(dt, [s, d], dk), dv: new Tensor(dt, [s, d], dv), dq: new Tensor(dt, [s, d], dq),
        dalpha: new Tensor(dt, [s], dalpha),
        dState0: { M: gradTensor(dt, [d, d], D) },
      };
    },
  },
  frozen: matrixFrozenRead,
  matrixChunk: { write: "v", momentum: false },
  // s = 1 from M_0 = 0: alpha never acts.
  checkMinimums: { seq_len: 2 },
  invariants: [
    {
      name: "write-read identity",
      spec: "docs/spec/titans-family.md#hebbian-tests write_read: alpha=0, M_0=0 gives M_1 = v k^T, and q = e0 reads y[1] = 1",
      check: (dtype) => writeReadIdentity(hebbian.inner, dtype, { alpha: 0 }),
    },
    {
      name: "linear attention at alpha = 0",
      spec: "docs/spec/linear-attention.md#linear-attn at alpha = 0 Hebbian is linear attention: y, M_s, dk, dv, dq, dM_0 equal the closed-form causal sums within 64 ulps",
      check: (dtype, seed) => linearAttentionAtZeroDecay(hebbian.inner, dtype, seed),
    },
  ],
};

/**
 * At α = 0 Hebbian is linear attention (docs/spec/linear-attention.md#linear-attn), whose outputs
 * and gradients have a closed form as causal sums over the tokens:
 *   y_t = M_0 q_t + Σ_{τ≤t} v_τ (k_τ · q_t)        M_s = M_0 + Σ_τ v_τ k_τᵀ
 *   dv_τ = dM_s k_τ + Σ_{t≥τ} dy_t (k_τ · q_t)      dk_τ = dM_sᵀ v_τ + Σ_{t≥τ} (dy_t · v_τ) q_t
 *   dq_t = M_0ᵀ dy_t + Σ_{τ≤t} (dy_t · v_τ) k_τ     dM_0 = dM_s + Σ_t dy_t q_tᵀ
 * The recurrence (`inner`, Hebbian's pair) must agree with each within 64 ulps of the tensor's largest magnitude (the same
 * products, summed in another order). Returns null when it does.
 */
export function linearAttentionAtZeroDecay(inner: InnerPair<string>, dtype: DType, seed: number): string | null {
  const rng = new Rng(seed);
  const d = 5, s = 7;
  const k = randTensor(rng, dtype, [s, d], -1, 1), v = randTensor(rng, dtype, [s, d], -1, 1), q = randTensor(rng, dtype, [s, d], -1, 1);
  const M0 = randTensor(rng, dtype, [d, d], -0.3, 0.3);
  const dy = randTensor(rng, dtype, [s, d], -1, 1), dM = randTensor(rng, dtype, [d, d], -1, 1);
  const cfg = { d, seq_len: s }, inp = { k, v, q, x: k, alpha: zeros(dtype, [s]) };
  const r = inner.forward(inp, { M: M0 }, cfg);
  const g = inner.backward(r.saved, inp, dy, cfg, { M: dM });
  const at = (t: Tensor, i: number, j: number) => t.data[i * d + j]!;
  const dot = (a: Tensor, i: number, b: Tensor, j: number) => {
    let z = 0;
    for (let c = 0; c < d; c++) z += at(a, i, c) * at(b, j, c);
    return z;
  };
  const want: Record<string, number[]> = { y: [], M_s: [], dv: [], dk: [], dq: [], dM_0: [] };
  for (let t = 0; t < s; t++) {
    for (let i = 0; i < d; i++) {
      let y = 0, gv = 0, gk = 0, gq = 0;
      for (let j = 0; j < d; j++) {
        y += at(M0, i, j) * at(q, t, j);
        gv += at(dM, i, j) * at(k, t, j);
        gk += at(dM, j, i) * at(v, t, j);
        gq += at(M0, j, i) * at(dy, t, j);
      }
      for (let u = 0; u <= t; u++) {
        y += at(v, u, i) * dot(k, u, q, t);
        gq += dot(dy, t, v, u) * at(k, u, i);
      }
      for (let u = t; u < s; u++) {
        gv += at(dy, u, i) * dot(k, t, q, u);
        gk += dot(dy, u, v, t) * at(q, u, i);
      }
      want.y!.push(y), want.dv!.push(gv), want.dk!.push(gk), want.dq!.push(gq);
    }
  }
  for (let i = 0; i < d; i++) {
    for (let j = 0; j < d; j++) {
      let m = at(M0, i, j), gm = at(dM, i, j);
      for (let t = 0; t < s; t++) m += at(v, t, i) * at(k, t, j), gm += at(dy, t, i) * at(q, t, j);
      want.M_s!.push(m), want.dM_0!.push(gm);
    }
  }
  const got: Record<string, Tensor | undefined> = { y: r.y, M_s: r.finalState.M, dv: g.dv, dk: g.dk, dq: g.dq, dM_0: g.dState0?.M };
  const eps = dtype === "f32" ? 2 ** -23 : 2 ** -52;
  for (const [name, w] of Object.entries(want)) {
    const p = got[name];
    if (p === undefined) return `${name} missing`;
    const scale = Math.max(...w.map(Math.abs));
    if (scale === 0) return `${name} is zero: the comparison would be vacuous`;
    for (let i = 0; i < w.length; i++) {
      if (!(Math.abs(p.data[i]! - w[i]!) <= 64 * eps * scale)) return `${name}[${i}] = ${p.data[i]}, linear attention's closed form gives ${w[i]}`;
    }
  }
  return null;
}
