/**
 * RWKV-6 (docs/spec/linear-attention.md#rwkv6): GLA's per-channel decay, read before the write,
 * the current token seen through a bonus per key channel. α_t and the bonus u_t = θ_t are channel
 * gates ([s, d], types.ts gateShape), a_t = 1 − α_t:
 *   y_t = M_t q_t + v_t (Σ_j u_t[j] k_t[j] q_t[j]) ;  M_{t+1} = M_t diag(a_t) + v_t k_tᵀ
 * M is [d_v, d_k] (fla's S = Mᵀ, exp w_t = a_t, r_t = q_t); fla's bonus u is one vector per head,
 * the case u_t = u at every token (docs/spec/decisions.md#rwkv6-bonus). k and q stay raw.
 * Frozen read: y_t = M q_t.
 */
import { accBuffer } from "../precision.ts";
import * as K from "../numeric.ts";
import { Rng } from "../rng.ts";
import { Tensor, alloc, zeros, type DType } from "../tensor.ts";
import { gla } from "./gla.ts";
import { channelDecayActsOnItsColumn } from "./kda.ts";
import { adjointFrom, gradTensor } from "./state-grad.ts";
import { randTensor } from "./matrix.ts";
import type { InnerPair, RuleDecl } from "./types.ts";

export const rwkv6: RuleDecl<"rwkv6"> = {
  key: "rwkv6",
  sheet: "docs/spec/linear-attention.md#rwkv6",
  // what it shares with GLA (docs/spec/linear-attention.md#rwkv6-params): parameters (α per
  // channel), raw k and q, the state M [d, d] and its initial and random values, the frozen read
  hyper: gla.hyper,
  projection: gla.projection,
  gates: ["alpha", "theta"],
  channelGates: ["alpha", "theta"],
  normalizeKQ: gla.normalizeKQ,
  omega: gla.omega,
  stateShapes: gla.stateShapes,
  init: gla.init,
  randomState: gla.randomState,
  frozen: gla.frozen,
  checkMinimums: { d: 2, seq_len: 2 },
  inner: {
    saved: ["mStates"],
    forward({ k, v, q, alpha, theta }, state, { d, seq_len: s }) {
      const dt = k.dtype, dd = d * d;
      const mStates = alloc(dt, (s + 1) * dd);
      mStates.set(state.M!.data);
      const y = alloc(dt, s * d);
      const A = alpha!.data, U = theta!.data;
      for (let t = 0; t < s; t++) {
        const mt = t * dd, mn = (t + 1) * dd, o = t * d;
        // the read of M_t, then the bonus b_t = Σ_j u_j k_j q_j times v_t
        K.matvec(mStates, mt, d, d, q.data, o, y, o);
        let b = 0;
        for (let j = 0; j < d; j++) b += U[o + j]! * k.data[o + j]! * q.data[o + j]!;
        for (let i = 0; i < d; i++) y[o + i] = y[o + i]! + b * v.data[o + i]!;
        // the write: column j (key channel j) keeps 1 − α_{t,j}, then v kᵀ
        for (let i = 0; i < d; i++) {
          const vi = v.data[o + i]!, r = i * d;
          for (let j = 0; j < d; j++) mStates[mn + r + j] = (1 - A[o + j]!) * mStates[mt + r + j]! + vi * k.data[o + j]!;
        }
      }
      return {
        y: new Tensor(dt, [s, d], y),
        finalState: { M: new Tensor(dt, [d, d], mStates.slice(s * dd)) },
        saved: { mStates: new Tensor(dt, [s + 1, d, d], mStates) },
      };
    },
    backward({ mStates }, { k, v, q, alpha, theta }, dy, { d, seq_len: s }, dFinal) {
      const dt = k.dtype, dd = d * d;
      const M = mStates!.data, A = alpha!.data, U = theta!.data;
      const dk = alloc(dt, s * d), dv = alloc(dt, s * d), dq = alloc(dt, s * d);
      const dalpha = alloc(dt, s * d), dtheta = alloc(dt, s * d);
      const D = adjointFrom(dFinal, "M", dd); // ∂L/∂M_{t+1}; after t = 0, ∂L/∂M_0
      const tmp = accBuffer(d), col = accBuffer(d), gv = accBuffer(d);
      for (let t = s - 1; t >= 0; t--) {
        const mt = t * dd, o = t * d;
        // the write M_{t+1} = M_t diag(a_t) + v kᵀ: dv = D k, dk = Dᵀ v, dα_j = −Σ_i D_ij (M_t)_ij
        K.matvec(D, 0, d, d, k.data, o, gv, 0);
        K.matTvec(D, 0, d, d, v.data, o, tmp, 0);
        col.fill(0);
        for (let i = 0; i < d; i++) for (let j = 0; j < d; j++) col[j]! += D[i * d + j]! * M[mt + i * d + j]!;
        for (let j = 0; j < d; j++) dalpha[o + j] = -col[j]!;
        // the bonus b = Σ_j u_j k_j q_j: c = ∂L/∂b = dyᵀ v ; dv += b dy
        const c = K.dot(dy.data, v.data, d, o, o);
        let b = 0;
        for (let j = 0; j < d; j++) b += U[o + j]! * k.data[o + j]! * q.data[o + j]!;
        for (let i = 0; i < d; i++) dv[o + i] = gv[i]! + b * dy.data[o + i]!;
        for (let j = 0; j < d; j++) {
          dk[o + j] = tmp[j]! + c * U[o + j]! * q.data[o + j]!;
          dtheta[o + j] = c * k.data[o + j]! * q.data[o + j]!;
        }
        // the read of M_t: dq = M_tᵀ dy + c u ⊙ k
        K.matTvec(M, mt, d, d, dy.data, o, tmp, 0);
        for (let j = 0; j < d; j++) dq[o + j] = tmp[j]! + c * U[o + j]! * k.data[o + j]!;
        // ∂L/∂M_t = D diag(a_t) + dy_t q_tᵀ
        for (let i = 0; i < d; i++) for (let j = 0; j < d; j++) D[i * d + j]! *= 1 - A[o + j]!;
        K.addOuter(D, 0, d, d, 1, dy.data, o, q.data, o);
      }
      return {
        dk: new Tensor(dt, [s, d], dk), dv: new Tensor(dt, [s, d], dv), dq: new Tensor(dt, [s, d], dq),
        dalpha: new Tensor(dt, [s, d], dalpha), dtheta: new Tensor(dt, [s, d], dtheta),
        dState0: { M: gradTensor(dt, [d, d], D) },
      };
    },
  },
  invariants: [
    {
      name: "the current token through the bonus",
      spec: "docs/spec/linear-attention.md#rwkv6-tests write_read: alpha=0, u=1 on every channel, M_0=0, k=q=e0, v=e1 gives M_1 = v k^T and y_0 = e1",
      check: (dtype) => bonusWriteRead(rwkv6.inner, dtype),
    },
    {
      name: "GLA at u = 1 without decay",
      spec: "docs/spec/linear-attention.md#rwkv6-tests with alpha = 0 and u = 1 on every channel RWKV-6 is GLA (linear attention): y, M_s, dk, dv, dq, dM_0 within 64 ulps",
      check: (dtype, seed) => equalsGlaWithoutDecay(rwkv6.inner, dtype, seed),
    },
    {
      name: "a channel's decay acts on its key column",
      spec: "docs/spec/linear-attention.md#rwkv6-tests one channel: alpha_t = 1 on key channel c alone, v = 0: M_1 is M_0 with column c zeroed, the others bitwise M_0's",
      check: (dtype, seed) => channelDecayActsOnItsColumn(rwkv6.inner, dtype, seed),
    },
    {
      name: "a channel's bonus acts on its key channel",
      spec: "docs/spec/linear-attention.md#rwkv6-tests one channel: u = 1 on key channel c alone, M_0 = 0: y_0 = v_0 k_0[c] q_0[c]",
      check: (dtype, seed) => channelBonusActsOnItsChannel(rwkv6.inner, dtype, seed),
    },
  ],
};

const EPS = (dtype: DType) => (dtype === "f32" ? 2 ** -23 : 2 ** -52);

/** One token from M_0 = 0, α = 0, u = 1, k = q = e₀, v = e₁: M_1 = e₁e₀ᵀ and y_0 = e₁, exactly. */
function bonusWriteRead(inner: InnerPair<string>, dtype: DType): string | null {
  const d = 4;
  const k = zeros(dtype, [1, d]), v = zeros(dtype, [1, d]), q = zeros(dtype, [1, d]);
  k.data[0] = 1;
  v.data[1] = 1;
  q.data[0] = 1;
  const u = zeros(dtype, [1, d]);
  u.data.fill(1);
  const r = inner.forward({ k, v, q, x: k, alpha: zeros(dtype, [1, d]), theta: u }, { M: zeros(dtype, [d, d]) }, { d, seq_len: 1 });
  const M1 = r.finalState.M!.data;
  for (let i = 0; i < d * d; i++) if (!Object.is(M1[i], i === d ? 1 : 0)) return `M_1[${Math.floor(i / d)}][${i % d}] = ${M1[i]}, expected ${i === d ? 1 : 0}`;
  for (let i = 0; i < d; i++) if (!Object.is(r.y.data[i], i === 1 ? 1 : 0)) return `y_0[${i}] = ${r.y.data[i]}, expected ${i === 1 ? 1 : 0} (read before the write, the token through its bonus)`;
  return null;
}

/**
 * With α = 0 and u = 1 on every channel, y_t = M_t q_t + v_t (k_t · q_t) = (M_t + v_t k_tᵀ) q_t = M_{t+1} q_t:
 * RWKV-6 is GLA without decay (linear attention). y, M_s, dk, dv, dq and dM_0 agree within 64 ulps
 * of the tensor's largest magnitude (the same sums, grouped differently); dα and du are each rule's own.
 */
function equalsGlaWithoutDecay(inner: InnerPair<string>, dtype: DType, seed: number): string | null {
  const rng = new Rng(seed);
  const d = 5, s = 7;
  const k = randTensor(rng, dtype, [s, d], -1, 1), v = randTensor(rng, dtype, [s, d], -1, 1), q = randTensor(rng, dtype, [s, d], -1, 1);
  const alpha = zeros(dtype, [s, d]), u = zeros(dtype, [s, d]);
  u.data.fill(1);
  const M0 = randTensor(rng, dtype, [d, d], -0.3, 0.3);
  const cfg = { d, seq_len: s };
  const dy = randTensor(rng, dtype, [s, d], -1, 1), dM = randTensor(rng, dtype, [d, d], -1, 1);
  const inp = { k, v, q, x: k, alpha, theta: u };
  const a = inner.forward(inp, { M: M0 }, cfg), b = gla.inner.forward(inp, { M: M0 }, cfg);
  const ga = inner.backward(a.saved, inp, dy, cfg, { M: dM }), gb = gla.inner.backward(b.saved, inp, dy, cfg, { M: dM });
  const pairs: [string, Tensor | undefined, Tensor | undefined][] = [
    ["y", a.y, b.y], ["M_s", a.finalState.M, b.finalState.M], ["dk", ga.dk, gb.dk], ["dv", ga.dv, gb.dv],
    ["dq", ga.dq, gb.dq], ["dM_0", ga.dState0?.M, gb.dState0?.M],
  ];
  for (const [name, p, r] of pairs) {
    if (p === undefined || r === undefined) return `${name} missing`;
    let scale = 0;
    for (let i = 0; i < r.size; i++) scale = Math.max(scale, Math.abs(r.data[i]!));
    if (scale === 0) return `${name} is zero: the comparison would be vacuous`;
    for (let i = 0; i < r.size; i++) {
      if (!(Math.abs(p.data[i]! - r.data[i]!) <= 64 * EPS(dtype) * scale)) return `${name}[${i}] = ${p.data[i]}, GLA at alpha = 0 gives ${r.data[i]}`;
    }
  }
  return null;
}

/**
 * One token from M_0 = 0, α = 0, u = 1 on key channel c alone (drawn from the seed): y_0 = v_0 k_0[c] q_0[c]
 * within 4 ulps. Pins the bonus's channel indexing (u applied to reversed channels fails it).
 */
export function channelBonusActsOnItsChannel(inner: InnerPair<string>, dtype: DType, seed: number): string | null {
  const rng = new Rng(seed);
  const d = 6;
  const c = rng.int(0, d - 1);
  const k = randTensor(rng, dtype, [1, d], 0.2, 1), v = randTensor(rng, dtype, [1, d], -1, 1), q = randTensor(rng, dtype, [1, d], 0.2, 1);
  const u = zeros(dtype, [1, d]);
  u.data[c] = 1;
  const r = inner.forward({ k, v, q, x: k, alpha: zeros(dtype, [1, d]), theta: u }, { M: zeros(dtype, [d, d]) }, { d, seq_len: 1 });
  for (let i = 0; i < d; i++) {
    const want = v.data[i]! * k.data[c]! * q.data[c]!;
    if (!(Math.abs(r.y.data[i]! - want) <= 4 * EPS(dtype) * Math.abs(want))) return `bonus on channel ${c}: y_0[${i}] = ${r.y.data[i]}, expected v_0[${i}] k_0[${c}] q_0[${c}] = ${want}`;
  }
  return null;
}
