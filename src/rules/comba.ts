/**
 * Comba (docs/spec/titans-family.md#comba): the delta correction reads the memory with a second
 * key p_t (auxInputs: p = X W_Pᵀ, L2-normalised as k is), the write goes along k_t:
 *   e_t = M_t p_t − v_t ;  M_{t+1} = (1 − α_t) M_t − θ_t e_t k_tᵀ ;  y_t = M_{t+1} q_t
 * The error reads the undecayed M_t (fla's fused_recurrent_comba subtracts Sᵀp before it decays S),
 * so with p = k Comba is Delta (delta.ts), not Gated Delta; the invariant below checks it bitwise.
 * Frozen read: y_t = M q_t.
 */
import { accBuffer } from "../precision.ts";
import * as K from "../numeric.ts";
import { Rng } from "../rng.ts";
import { Tensor, alloc, type DType } from "../tensor.ts";
import { delta } from "./delta.ts";
import { adjointFrom, gradTensor } from "./state-grad.ts";
import { combaLongInputs } from "./long-inputs.ts";
import { randTensor, unitRows, writeReadIdentity } from "./matrix.ts";
import type { InnerInputs, InnerPair, RuleDecl } from "./types.ts";

export const comba: RuleDecl<"comba"> = {
  key: "comba",
  sheet: "docs/spec/titans-family.md#comba",
  // what it shares with Delta (docs/spec/titans-family.md#comba-params): gates, the state M [d, d]
  // and its initial and random values, the frozen read and the check minimums
  hyper: delta.hyper,
  projection: delta.projection,
  gates: delta.gates,
  normalizeKQ: delta.normalizeKQ,
  omega: delta.omega,
  auxInputs: ["p"],
  stateShapes: delta.stateShapes,
  init: delta.init,
  randomState: delta.randomState,
  frozen: delta.frozen,
  checkMinimums: delta.checkMinimums,
  // M ← (1 − α) M − θ (M p − v) kᵀ: along p the transition is (1 − α) − θ kᵀp, above 1 when kᵀp < 0 for
  // independent unit p and k (the f64 reference's y reached 1.2e38 at t = 564 of T = 1020). The long
  // regime draws p near k instead (docs/spec/titans-family.md#comba-long).
  longInputs: combaLongInputs,
  inner: {
    saved: ["mStates", "e"],
    forward({ k, v, q, p, alpha, theta }, state, { d, seq_len: s }) {
      const dd = d * d;
      const mStates = alloc(k.dtype, (s + 1) * dd);
      mStates.set(state.M!.data);
      const e = alloc(k.dtype, s * d);
      const y = alloc(k.dtype, s * d);
      for (let t = 0; t < s; t++) {
        const mt = t * dd, mn = (t + 1) * dd, o = t * d;
        K.matvec(mStates, mt, d, d, p!.data, o, e, o); // the correction reads M_t with p
        for (let i = 0; i < d; i++) e[o + i]! -= v.data[o + i]!;
        const a = alpha!.data[t]!, th = theta!.data[t]!;
        for (let i = 0; i < dd; i++) mStates[mn + i] = (1 - a) * mStates[mt + i]!;
        K.addOuter(mStates, mn, d, d, -th, e, o, k.data, o); // and writes along k
        K.matvec(mStates, mn, d, d, q.data, o, y, o);
      }
      const dt = k.dtype;
      return {
        y: new Tensor(dt, [s, d], y),
        finalState: { M: new Tensor(dt, [d, d], mStates.slice(s * dd)) },
        saved: { mStates: new Tensor(dt, [s + 1, d, d], mStates), e: new Tensor(dt, [s, d], e) },
      };
    },
    backward({ mStates, e }, { k, q, p, alpha, theta }, dy, { d, seq_len: s }, dFinal) {
      const dt = k.dtype, dd = d * d;
      const M = mStates!.data, E = e!.data;
      const dk = alloc(dt, s * d), dv = alloc(dt, s * d), dq = alloc(dt, s * d), dp = alloc(dt, s * d);
      const dalpha = alloc(dt, s), dtheta = alloc(dt, s);
      const D = adjointFrom(dFinal, "M", dd); // ∂L/∂M_{t+1}; after t = 0, ∂L/∂M_0
      const de = accBuffer(d), tmp = accBuffer(d);
      for (let t = s - 1; t >= 0; t--) {
        const mt = t * dd, mn = (t + 1) * dd, o = t * d;
        K.addOuter(D, 0, d, d, 1, dy.data, o, q.data, o);
        K.matTvec(M, mn, d, d, dy.data, o, dq, o);
        dalpha[t] = -K.frob(D, 0, M, mt, dd);
        const th = theta!.data[t]!, a = alpha!.data[t]!;
        // dθ = −⟨D, e kᵀ⟩ = −eᵀ D k
        K.matvec(D, 0, d, d, k.data, o, de, 0);
        dtheta[t] = -K.dot(E, de, d, o, 0);
        // the write −θ e kᵀ: de = −θ D k ; dk = −θ Dᵀ e
        for (let i = 0; i < d; i++) de[i]! *= -th;
        K.matTvec(D, 0, d, d, E, o, tmp, 0);
        for (let j = 0; j < d; j++) dk[o + j] = -th * tmp[j]!;
        for (let i = 0; i < d; i++) dv[o + i] = -de[i]!;
        // the prediction M_t p_t: ∂/∂p = M_tᵀ de, ∂/∂M_t += de pᵀ
        K.matTvec(M, mt, d, d, de, 0, tmp, 0);
        for (let j = 0; j < d; j++) dp[o + j] = tmp[j]!;
        for (let i = 0; i < dd; i++) D[i]! *= 1 - a;
        K.addOuter(D, 0, d, d, 1, de, 0, p!.data, o);
      }
      return {
        dk: new Tensor(dt, [s, d], dk), dv: new Tensor(dt, [s, d], dv), dq: new Tensor(dt, [s, d], dq), dp: new Tensor(dt, [s, d], dp),
        dalpha: new Tensor(dt, [s], dalpha), dtheta: new Tensor(dt, [s], dtheta),
        dState0: { M: gradTensor(dt, [d, d], D) },
      };
    },
  },
  invariants: [
    {
      name: "write-read identity",
      spec: "docs/spec/titans-family.md#comba-tests write_read: p = k, alpha=0, theta=1, M_0=0 gives M_1 = v k^T",
      check: (dtype) => writeReadIdentity(withPEqualK(comba.inner), dtype, { alpha: 0, theta: 1 }),
    },
    {
      name: "Delta at p = k",
      spec: "docs/spec/titans-family.md#comba-tests with p = k Comba is Delta, bitwise but for dk, where Comba's dk + dp is Delta's dk",
      check: (dtype, seed) => equalsDeltaAtPEqualK(comba.inner, dtype, seed),
    },
  ],
};

/** The pair with p set to k (for the identities that hold there). */
function withPEqualK(inner: InnerPair<string>): InnerPair<string> {
  return {
    saved: inner.saved,
    forward: (inp, state, cfg) => inner.forward({ ...inp, p: inp.k }, state, cfg),
    backward: (saved, inp, dy, cfg, dFinal) => inner.backward(saved, { ...inp, p: inp.k }, dy, cfg, dFinal),
  };
}


/**
 * With p = k Comba is Delta: on a random case with a random initial state, y, the final state and
 * dv, dq, dα, dθ, dM_0 agree bitwise; Comba's dk + dp is Delta's dk (the same two terms, which Delta
 * adds in its state dtype and Comba returns apart): bitwise in f64, within 2 ulps in f32.
 */
export function equalsDeltaAtPEqualK(inner: InnerPair<string>, dtype: DType, seed: number): string | null {
  const rng = new Rng(seed);
  const d = 5, s = 7;
  const k = unitRows(randTensor(rng, dtype, [s, d], -1, 1)), v = randTensor(rng, dtype, [s, d], -1, 1);
  const q = unitRows(randTensor(rng, dtype, [s, d], -1, 1));
  const alpha = randTensor(rng, dtype, [s], 0.05, 0.95), theta = randTensor(rng, dtype, [s], 0.05, 0.9);
  const M0 = randTensor(rng, dtype, [d, d], -0.3, 0.3);
  const cfg = { d, seq_len: s };
  const dy = randTensor(rng, dtype, [s, d], -1, 1), dM = randTensor(rng, dtype, [d, d], -1, 1);
  const inp: InnerInputs = { k, v, q, x: k, alpha, theta };
  const a = inner.forward({ ...inp, p: k }, { M: M0 }, cfg);
  const b = delta.inner.forward(inp, { M: M0 }, cfg);
  const ga = inner.backward(a.saved, { ...inp, p: k }, dy, cfg, { M: dM });
  const gb = delta.inner.backward(b.saved, inp, dy, cfg, { M: dM });
  const pairs: [string, Tensor | undefined, Tensor | undefined][] = [
    ["y", a.y, b.y], ["M_s", a.finalState.M, b.finalState.M], ["dv", ga.dv, gb.dv], ["dq", ga.dq, gb.dq],
    ["dalpha", ga.dalpha, gb.dalpha], ["dtheta", ga.dtheta, gb.dtheta], ["dM_0", ga.dState0?.M, gb.dState0?.M],
  ];
  for (const [name, x, r] of pairs) {
    if (x === undefined || r === undefined) return `${name} missing`;
    for (let i = 0; i < r.size; i++) if (!Object.is(x.data[i], r.data[i])) return `${name}[${i}] = ${x.data[i]}, Delta gives ${r.data[i]}`;
  }
  if (ga.dk === undefined || ga.dp === undefined || gb.dk === undefined) return "dk or dp missing";
  const ulp = dtype === "f32" ? 2 ** -23 : 0;
  for (let i = 0; i < gb.dk.size; i++) {
    const sum = ga.dk.data[i]! + ga.dp.data[i]!, want = gb.dk.data[i]!;
    if (!(Math.abs(sum - want) <= 2 * ulp * (Math.abs(ga.dk.data[i]!) + Math.abs(ga.dp.data[i]!)))) {
      return `dk + dp [${i}] = ${sum}, Delta's dk is ${want}`;
    }
  }
  return null;
}
