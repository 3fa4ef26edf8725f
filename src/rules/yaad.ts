/**
 * YAAD (docs/spec/miras-compression.md#yaad): 2-layer MLP memory, Huber attentional bias, decoupled L2
 * retention toward the boundary snapshot B, read after the write.
 *   a_t = W1_t k_t ; h_t = silu(a_t) ; e_t = W2_t h_t − v_t ; g_t = ψ(e_t)
 *   ψ(e) = e if |e| < δ else δ·sign(e)                      (no factor 2; |e| = δ is clipped)
 *   G2_t = g_t h_tᵀ ; u_t = (W2_tᵀ g_t) ⊙ silu'(a_t) ; G1_t = u_t k_tᵀ
 *   W_{t+1} = α_t W_t − θ_t (G_t + 2λ_loc (W_t − B) + 2λ₂ W_t)      for (W, G, B) ∈ {(W1,G1,B1), (W2,G2,B2)}
 *   y_t = W2_{t+1} silu(W1_{t+1} q_t)
 * B = W_0, the state at the start of this call (§3.2; docs/spec/fixtures.md#rule-state: not an input).
 */
import { accBuffer } from "../precision.ts";
import * as K from "../numeric.ts";
import { Rng } from "../rng.ts";
import { Tensor, alloc, zeros } from "../tensor.ts";
import {
  D_HIDDEN, MlpScratch, chainIn, chainOut, dHidden, hashInit, innerGradDot, innerGradient, mlpFrozenRead, mlpRead,
  mlpStateShapes, randomMlpState, readVjp, type Bias,
} from "./mlp.ts";
import { adjointFrom, gradTensor } from "./state-grad.ts";
import type { InnerInputs, RuleConfig, RuleDecl } from "./types.ts";

/** §3.3 Huber bias ψ and §3.5 ψ'(e) = 1 if |e| < δ else 0. */
export function huber(delta: number): Bias {
  return {
    phi: (e) => (Math.abs(e) < delta ? e : delta * Math.sign(e)),
    dphi: (e) => (Math.abs(e) < delta ? 1 : 0),
  };
}

interface YaadHyper { dh: number; delta: number; lLoc: number; l2: number }

function hyperOf(cfg: RuleConfig): YaadHyper {
  return { dh: dHidden(cfg), delta: Number(cfg.delta), lLoc: Number(cfg.lambda_local), l2: Number(cfg.lambda_2) };
}

export const yaad: RuleDecl<"yaad"> = {
  key: "yaad",
  sheet: "docs/spec/miras-compression.md#yaad",
  hyper: {
    d_hidden: D_HIDDEN,
    delta: { kind: "real", default: 1, min: 1e-6, max: 1e6, sample: [0.05, 2], doc: "Huber threshold δ (§3.3)" },
    // ≤ 0.25 each keeps the retain factor α − θ(2λ_loc + 2λ₂) in (−1, 1) at the checks' gate levels (θ ≤ 0.8).
    lambda_local: { kind: "real", default: 0.01, min: 0, max: 10, sample: [0, 0.25], doc: "pull toward the boundary snapshot B, λ_loc" },
    lambda_2: { kind: "real", default: 0.01, min: 0, max: 10, sample: [0, 0.25], doc: "global L2 retention λ₂" },
  },
  projection: "memory",
  gates: ["alpha", "theta"],
  normalizeKQ: false,
  omega: false,
  stateShapes: mlpStateShapes,
  init: hashInit,
  randomState: randomMlpState,
  // d = 1: a token's value is v_t = w_v·x_t with |x_t| in [0.5, 1] (the cases' normalised rows), so v
  // never nears zero; with δ below |w_v|/2 every error is clipped (ψ' = 0) and dv is zero for the
  // whole case (docs/spec/miras-compression.md#yaad-hyper).
  checkMinimums: { d: 2 },
  inner: {
    saved: ["w1States", "w2States"],
    forward({ k, v, q, alpha, theta }, state, cfg) {
      const { d, seq_len: s } = cfg, { dh, delta, lLoc, l2 } = hyperOf(cfg);
      const dt = k.dtype, n1 = dh * d, n2 = d * dh;
      const psi = huber(delta);
      const W1 = alloc(dt, (s + 1) * n1), W2 = alloc(dt, (s + 1) * n2);
      W1.set(state.W1!.data);
      W2.set(state.W2!.data);
      // B1 = W1[0 : n1], B2 = W2[0 : n2]: the boundary snapshot is the first saved state.
      const sc = new MlpScratch(dt, d, dh);
      const y = alloc(dt, s * d);
      for (let t = 0; t < s; t++) {
        const o = t * d, c1 = t * n1, c2 = t * n2, x1 = c1 + n1, x2 = c2 + n2;
        const al = alpha!.data[t]!, th = theta!.data[t]!;
        innerGradient(sc, W1, c1, W2, c2, k.data, v.data, o, psi);
        for (let i = 0; i < dh; i++) {
          const ui = sc.u[i]!;
          for (let j = 0; j < d; j++) {
            const ij = i * d + j, w = W1[c1 + ij]!;
            W1[x1 + ij] = al * w - th * (ui * k.data[o + j]! + 2 * lLoc * (w - W1[ij]!) + 2 * l2 * w);
          }
        }
        for (let i = 0; i < d; i++) {
          const gi = sc.g[i]!;
          for (let j = 0; j < dh; j++) {
            const ij = i * dh + j, w = W2[c2 + ij]!;
            W2[x2 + ij] = al * w - th * (gi * sc.h[j]! + 2 * lLoc * (w - W2[ij]!) + 2 * l2 * w);
          }
        }
        mlpRead(sc, W1, x1, W2, x2, q.data, o, y, o);
      }
      return {
        y: new Tensor(dt, [s, d], y),
        finalState: { W1: new Tensor(dt, [dh, d], W1.slice(s * n1)), W2: new Tensor(dt, [d, dh], W2.slice(s * n2)) },
        saved: { w1States: new Tensor(dt, [s + 1, dh, d], W1), w2States: new Tensor(dt, [s + 1, d, dh], W2) },
      };
    },
    backward({ w1States, w2States }, { k, v, q, alpha, theta }, dy, cfg, dFinal) {
      const { d, seq_len: s } = cfg, { dh, delta, lLoc, l2 } = hyperOf(cfg);
      const dt = k.dtype, n1 = dh * d, n2 = d * dh;
      const psi = huber(delta);
      const W1 = w1States!.data, W2 = w2States!.data;
      const dk = alloc(dt, s * d), dv = alloc(dt, s * d), dq = alloc(dt, s * d);
      const dalpha = alloc(dt, s), dtheta = alloc(dt, s);
      const Wh1 = adjointFrom(dFinal, "W1", n1), Wh2 = adjointFrom(dFinal, "W2", n2); // Ŵ = ∂L/∂W_{t+1}
      // B = W_0 is pulled toward by every step: Σ_t 2λ_loc θ_t Ŵ_{t+1} reaches W_0 through B
      const Bb1 = accBuffer(n1), Bb2 = accBuffer(n2);
      const sc = new MlpScratch(dt, d, dh);
      for (let t = s - 1; t >= 0; t--) {
        const o = t * d, c1 = t * n1, c2 = t * n2, x1 = c1 + n1, x2 = c2 + n2;
        const al = alpha!.data[t]!, th = theta!.data[t]!;
        readVjp(sc, W1, x1, W2, x2, q.data, dy.data, o, Wh1, Wh2);
        dq.set(sc.dq, o);
        innerGradient(sc, W1, c1, W2, c2, k.data, v.data, o, psi);
        chainIn(sc, Wh1, Wh2, k.data, o);
        // dα = ⟨Ŵ, W_t⟩ ; dθ = −Σ ⟨Ŵ, G_t + 2λ_loc (W_t − B) + 2λ₂ W_t⟩  (B = W_0 is not a gate input)
        const hw = K.frob(Wh1, 0, W1, c1, n1) + K.frob(Wh2, 0, W2, c2, n2);
        const hb = K.frob(Wh1, 0, W1, 0, n1) + K.frob(Wh2, 0, W2, 0, n2);
        dalpha[t] = hw;
        dtheta[t] = -(innerGradDot(sc) + 2 * lLoc * (hw - hb) + 2 * l2 * hw);
        const pull = 2 * lLoc * th;
        for (let i = 0; i < n1; i++) Bb1[i]! += pull * Wh1[i]!;
        for (let i = 0; i < n2; i++) Bb2[i]! += pull * Wh2[i]!;
        // D = (α − θ(2λ_loc + 2λ₂)) Ŵ + chain, and it is the next Ŵ
        const keep = al - th * (2 * lLoc + 2 * l2);
        for (let i = 0; i < n1; i++) Wh1[i]! *= keep;
        for (let i = 0; i < n2; i++) Wh2[i]! *= keep;
        chainOut(sc, -th, W1, c1, W2, c2, k.data, o, Wh1, Wh2, psi);
        dk.set(sc.dk, o);
        dv.set(sc.dv, o);
      }
      return {
        dk: new Tensor(dt, [s, d], dk), dv: new Tensor(dt, [s, d], dv), dq: new Tensor(dt, [s, d], dq),
        dalpha: new Tensor(dt, [s], dalpha), dtheta: new Tensor(dt, [s], dtheta),
        dState0: { W1: gradTensor(dt, [dh, d], Wh1.map((x: number, i: number) => x + Bb1[i]!)), W2: gradTensor(dt, [d, dh], Wh2.map((x: number, i: number) => x + Bb2[i]!)) },
      };
    },
  },
  frozen: mlpFrozenRead,
  derivedState: ["B1", "B2"],
  invariants: [
    {
      name: "Huber clipping values",
      spec: "docs/spec/miras-compression.md#yaad-tests test_yaad_huber_gradient_bounded (δ=1: ψ(0.5)=0.5, ψ(−0.3)=−0.3, ψ(5)=1, ψ(−10)=−1, ψ(0.99)=0.99) and §10.11 (|e| = δ is clipped: ψ'(δ) = 0)",
      check() {
        const psi = huber(1);
        const cases: [number, number, number][] = [[0.5, 0.5, 1], [-0.3, -0.3, 1], [5, 1, 0], [-10, -1, 0], [0.99, 0.99, 1], [1, 1, 0], [-1, -1, 0]];
        for (const [e, want, dwant] of cases) {
          if (psi.phi(e) !== want) return `ψ(${e}) = ${psi.phi(e)}, expected ${want}`;
          if (psi.dphi(e) !== dwant) return `ψ'(${e}) = ${psi.dphi(e)}, expected ${dwant}`;
        }
        return null;
      },
    },
    {
      name: "Huber-bounded write under huge errors",
      spec: "docs/spec/miras-compression.md#yaad-forward: g = ψ(e) with |ψ| ≤ δ, so the inner gradient is bounded whatever v is",
      check(dtype, seed) {
        const d = 5, dh = 3, s = 4, delta = 0.7;
        const cfg = { d, seq_len: s, d_hidden: dh, delta, lambda_local: 0, lambda_2: 0 };
        const rng = new Rng(seed), rnd = () => rng.next();
        const state = randomMlpState(cfg, dtype, rnd);
        const mk = (n: number[], f: () => number) => {
          const t = zeros(dtype, n);
          for (let i = 0; i < t.size; i++) t.data[i] = f();
          return t;
        };
        const k = mk([s, d], () => rnd() * 2 - 1), q = mk([s, d], () => rnd() * 2 - 1);
        const alpha = mk([s], () => 1), theta = mk([s], () => 0.8);
        const vDir = mk([s, d], () => (rnd() < 0.5 ? -1 : 1) * (1 + rnd()));
        const run = (scale: number) => {
          const v = mk([s, d], () => 0);
          for (let i = 0; i < v.size; i++) v.data[i] = scale * vDir.data[i]!;
          const inp: InnerInputs = { k, v, q, x: k, alpha, theta };
          return yaad.inner.forward(inp, state, cfg);
        };
        const big = run(1e6), huge = run(1e9);
        // Every error is clipped to ∓δ in both runs, so the two runs are the same computation.
        for (const n of ["W1", "W2"]) {
          const a = big.finalState[n]!.data, b = huge.finalState[n]!.data;
          for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return `${n}[${i}] differs between |v|~1e6 and |v|~1e9: ${a[i]} vs ${b[i]}`;
        }
        // With α = 1 and λ = 0, W2_1 − W2_0 = −θ ψ(e_0) h_0ᵀ: entries at most θ δ max|h_0|.
        const W1 = state.W1!.data, W20 = state.W2!.data, W21 = huge.saved.w2States!.data, n2 = d * dh;
        let hmax = 0;
        for (let i = 0; i < dh; i++) hmax = Math.max(hmax, Math.abs(K.silu(K.dot(W1, k.data, d, i * d, 0))));
        const bound = theta.data[0]! * delta * hmax;
        // plus the rounding of the stored W2_1 (a few ulps of |W2_0| + the step)
        const ulp = dtype === "f64" ? 2 ** -52 : 2 ** -23;
        for (let i = 0; i < n2; i++) {
          const step = Math.abs(W21[n2 + i]! - W20[i]!);
          if (!(step <= bound + 4 * ulp * (Math.abs(W20[i]!) + bound))) {
            return `|W2_1 − W2_0|[${i}] = ${step} exceeds θ δ max|h_0| = ${bound} with |v| ~ 1e9`;
          }
        }
        return null;
      },
    },
  ],
};
