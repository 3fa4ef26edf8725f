/**
 * Sliding-window attention (docs/spec/titans-family.md#swa), rule-level form of the docs/spec/README.md
 * "Fixture details": y = SWA(X W_qᵀ, X W_kᵀ, X W_vᵀ), no state, no output projection.
 * Per head h (columns [h·hd, (h+1)·hd)), per position i, with τ = 1/√hd:
 *   j0 = max(0, i − ws + 1) ;  L = i − j0 + 1
 *   score_w = τ ⟨Q[i,h], K[j0+w,h]⟩  (w < L) ;  P[h,i,·] = softmax(score) ;  A[i,h] = Σ_{w<L} P_w V[j0+w,h]
 * P is kept as [nh, s, ws] with P_w = 0 for L ≤ w < ws (the −∞ scores).
 */
import { accBuffer, accStep } from "../precision.ts";
import { Rng } from "../rng.ts";
import { Tensor, alloc, zeros, type DType, type Data } from "../tensor.ts";
import type { InnerInputs, RuleConfig, RuleDecl } from "./types.ts";

function heads(cfg: RuleConfig): { nh: number; hd: number; ws: number } {
  const nh = cfg.heads as number, ws = cfg.window as number;
  if (cfg.d % nh !== 0) throw new Error(`rule 'swa': heads = ${nh} does not divide d = ${cfg.d}`);
  return { nh, hd: cfg.d / nh, ws };
}

export const swa: RuleDecl<"swa"> = {
  key: "swa",
  sheet: "docs/spec/titans-family.md#swa",
  hyper: {
    heads: { kind: "int", default: 1, min: 1, max: 4096, sample: [1, 4], boundByD: "divides", doc: "number of heads nh; must divide d (hd = d / nh)" },
    window: { kind: "int", default: 4, min: 1, max: 1 << 20, sample: [1, 9], doc: "window ws: position i attends to i−ws+1 .. i" },
  },
  projection: "attention",
  gates: [],
  normalizeKQ: false,
  omega: false,
  stateShapes: () => ({}),
  init: () => ({}),
  randomState: () => ({}),
  inner: {
    saved: ["attnP"],
    forward({ k, v, q }, _state, cfg) {
      const { d, seq_len: s } = cfg;
      const { nh, hd, ws } = heads(cfg);
      const dt = q.dtype, tau = 1 / Math.sqrt(hd);
      const P = alloc(dt, nh * s * ws), y = alloc(dt, s * d);
      const score = accBuffer(ws);
      for (let h = 0; h < nh; h++) {
        const c0 = h * hd;
        for (let i = 0; i < s; i++) {
          const j0 = Math.max(0, i - ws + 1), L = i - j0 + 1, pi = (h * s + i) * ws;
          let mx = -Infinity;
          for (let w = 0; w < L; w++) {
            let dot = 0;
            for (let c = 0; c < hd; c++) dot = accStep(dot + q.data[i * d + c0 + c]! * k.data[(j0 + w) * d + c0 + c]!);
            score[w] = tau * dot;
            mx = Math.max(mx, score[w]!);
          }
          let sum = 0;
          for (let w = 0; w < L; w++) {
            score[w] = Math.exp(score[w]! - mx);
            sum = accStep(sum + score[w]!);
          }
          for (let w = 0; w < L; w++) P[pi + w] = score[w]! / sum;
          for (let c = 0; c < hd; c++) {
            let a = 0;
            for (let w = 0; w < L; w++) a = accStep(a + P[pi + w]! * v.data[(j0 + w) * d + c0 + c]!);
            y[i * d + c0 + c] = a;
          }
        }
      }
      return { y: new Tensor(dt, [s, d], y), finalState: {}, saved: { attnP: new Tensor(dt, [nh, s, ws], P) } };
    },
    backward({ attnP }, { k, v, q }, dy, cfg) {
      const { d, seq_len: s } = cfg;
      const { nh, hd, ws } = heads(cfg);
      const dt = q.dtype, tau = 1 / Math.sqrt(hd);
      const P = attnP!.data;
      // K and V rows collect from up to ws query positions, so they are summed in f64 first.
      const dQ = accBuffer(s * d), dK = accBuffer(s * d), dV = accBuffer(s * d);
      const dP = accBuffer(ws);
      for (let h = 0; h < nh; h++) {
        const c0 = h * hd;
        for (let i = 0; i < s; i++) {
          const j0 = Math.max(0, i - ws + 1), L = i - j0 + 1, pi = (h * s + i) * ws, ai = i * d + c0;
          let pdp = 0;
          for (let w = 0; w < L; w++) {
            const bj = (j0 + w) * d + c0, pw = P[pi + w]!;
            let dot = 0;
            for (let c = 0; c < hd; c++) {
              dot = accStep(dot + dy.data[ai + c]! * v.data[bj + c]!);
              dV[bj + c]! += pw * dy.data[ai + c]!;
            }
            dP[w] = dot;
            pdp = accStep(pdp + pw * dot);
          }
          for (let w = 0; w < L; w++) {
            const bj = (j0 + w) * d + c0;
            const dS = tau * P[pi + w]! * (dP[w]! - pdp);
            for (let c = 0; c < hd; c++) {
              dQ[ai + c]! += dS * k.data[bj + c]!;
              dK[bj + c]! += dS * q.data[ai + c]!;
            }
          }
        }
      }
      const out = (g: Data) => {
        const t = alloc(dt, s * d);
        t.set(g);
        return new Tensor(dt, [s, d], t);
      };
      return { dq: out(dQ), dk: out(dK), dv: out(dV) };
    },
  },
  frozen: null,
  // One position or a window of 1: the softmax weight is the constant 1, so W_q and W_k get none.
  checkMinimums: { seq_len: 2, hyper: { window: 2 } },
  invariants: [
    {
      name: "single position copies V",
      spec: "docs/spec/titans-family.md#swa single_position: with s = 1 the only weight is 1, so A[0] = V[0]",
      check(dtype, seed) {
        const rng = new Rng(seed);
        const d = 6, cfg: RuleConfig = { d, seq_len: 1, heads: 2, window: 3 };
        const inp = randomQKV(dtype, 1, d, rng);
        return rowsMatch(dtype, forwardY(inp, cfg), inp.v.data, 0, d, "A[0]", "V[0]");
      },
    },
    {
      name: "window limiting",
      spec: "docs/spec/titans-family.md#swa window_limiting: s = 4, ws = 2, equal scores ⇒ A[3] = mean(V[2], V[3])",
      check(dtype, seed) {
        const rng = new Rng(seed);
        const d = 4, s = 4, cfg: RuleConfig = { d, seq_len: s, heads: 2, window: 2 };
        const inp = randomQKV(dtype, s, d, rng);
        inp.k.data.fill(0); // every score is 0, so the weights are uniform over the window
        const mean = accBuffer(d);
        for (let c = 0; c < d; c++) mean[c] = (inp.v.data[2 * d + c]! + inp.v.data[3 * d + c]!) / 2;
        return rowsMatch(dtype, forwardY(inp, cfg).subarray(3 * d), mean, 0, d, "A[3]", "mean(V[2], V[3])");
      },
    },
    {
      name: "causal",
      spec: "docs/spec/titans-family.md#swa causal_masking: A[i] depends only on positions j <= i",
      check(dtype, seed) {
        const rng = new Rng(seed);
        const d = 6, s = 7, cfg: RuleConfig = { d, seq_len: s, heads: 3, window: 4 };
        const inp = randomQKV(dtype, s, d, rng);
        const y = forwardY(inp, cfg);
        for (let t = 0; t < s - 1; t++) {
          const moved = { ...inp, q: copy(inp.q), k: copy(inp.k), v: copy(inp.v) };
          for (const m of [moved.q, moved.k, moved.v]) for (let i = (t + 1) * d; i < s * d; i++) m.data[i] = rng.uniform(-2, 2);
          const y2 = forwardY(moved, cfg);
          for (let i = 0; i < (t + 1) * d; i++) {
            if (y2[i] !== y[i]) return `changing positions > ${t} changed A[${Math.floor(i / d)}][${i % d}]: ${y[i]} -> ${y2[i]}`;
          }
        }
        return null;
      },
    },
    {
      name: "weights are a distribution over the window",
      spec: "docs/spec/titans-family.md#swa multi_head: per head and position the weights sum to 1 over w < L and are 0 beyond",
      check(dtype, seed) {
        const rng = new Rng(seed);
        const d = 8, s = 9, ws = 4, nh = 4, cfg: RuleConfig = { d, seq_len: s, heads: nh, window: ws };
        const P = swa.inner.forward(randomQKV(dtype, s, d, rng), {}, cfg).saved.attnP!.data;
        const tol = 4 * ulp(dtype) * ws;
        for (let h = 0; h < nh; h++) for (let i = 0; i < s; i++) {
          const L = Math.min(i + 1, ws), o = (h * s + i) * ws;
          let sum = 0;
          for (let w = 0; w < ws; w++) {
            if (w >= L && P[o + w] !== 0) return `head ${h}, position ${i}: weight ${w} outside the window is ${P[o + w]}`;
            sum += P[o + w]!;
          }
          if (!(Math.abs(sum - 1) <= tol)) return `head ${h}, position ${i}: weights sum to ${sum}`;
        }
        return null;
      },
    },
  ],
};

/** Unit roundoff of the storage dtype: the checks allow only a few storage roundings. */
function ulp(dtype: DType): number {
  return dtype === "f64" ? 2 ** -52 : 2 ** -23;
}

type QKV = InnerInputs & { q: Tensor; k: Tensor; v: Tensor };

function randomQKV(dtype: DType, s: number, d: number, rng: Rng): QKV {
  const t = () => {
    const x = zeros(dtype, [s, d]);
    for (let i = 0; i < x.size; i++) x.data[i] = rng.uniform(-2, 2);
    return x;
  };
  const q = t(), k = t(), v = t();
  return { q, k, v, x: q };
}

function copy(t: Tensor): Tensor {
  return new Tensor(t.dtype, t.shape, t.data.slice());
}

function forwardY(inp: InnerInputs, cfg: RuleConfig) {
  return swa.inner.forward(inp, {}, cfg).y.data;
}

/** got[0..n) against want[wo..wo+n), within a few roundings of the stored result. */
function rowsMatch(dtype: DType, got: ArrayLike<number>, want: ArrayLike<number>, wo: number, n: number,
  gotName: string, wantName: string): string | null {
  for (let c = 0; c < n; c++) {
    const g = got[c]!, w = want[wo + c]!;
    if (!(Math.abs(g - w) <= 4 * ulp(dtype) * Math.max(1, Math.abs(w)))) return `${gotName}[${c}] = ${g}, ${wantName}[${c}] = ${w}`;
  }
  return null;
}
