/**
 * Lattice OSR (docs/spec/miras-compression.md#lattice): m unit-norm slots, READ BEFORE WRITE.
 *   READ   ρ_i = S_t[i]·q_t ;  w = softmax(ρ) ;  y_t = Σ_i w_i S_t[i]
 *   WRITE  γ_i = σ(S_t[i]·k_t) ;  u_i = v_t | k_t | v_t − (S_t[i]·v_t) S_t[i]   (decode | encode | similarity)
 *          δ_i = α_t γ_i u_i ;  p_i = S_t[i]·δ_i ;  ũ_i = (1 − p_i) S_t[i] + δ_i
 *          S_{t+1}[i] = ũ_i / ‖ũ_i‖  if ‖ũ_i‖ > 1e-8  else  S_t[i]
 * α is the write scale; θ is unused (its parameters get zero gradient). Frozen read: the READ
 * line on a fixed S (§5.4).
 */
import { accBuffer, accStep } from "../precision.ts";
import * as K from "../numeric.ts";
import { Rng, initHash } from "../rng.ts";
import { Tensor, alloc, zeros, type Data, type DType } from "../tensor.ts";
import { adjointFrom, gradTensor } from "./state-grad.ts";
import type { FrozenPair, InnerInputs, Invariant, RuleConfig, RuleDecl, State } from "./types.ts";

export const VARIANTS = ["decode", "encode", "similarity"] as const;
export type Variant = (typeof VARIANTS)[number];

/** Below this the tangent step is degenerate and the slot keeps its old value (§5.3, §5.6). */
export const FALLBACK = 1e-8;

/** Divides each row of S [m, d] by its norm, leaving (near-)zero rows as they are (§5.2). */
function normalizeSlots(S: Data, m: number, d: number): void {
  for (let i = 0; i < m; i++) {
    const n = Math.sqrt(K.dot(S, S, d, i * d, i * d));
    if (n > FALLBACK) for (let j = 0; j < d; j++) S[i * d + j] = S[i * d + j]! / n;
  }
}

/** u_i of the chosen variant into `out` (f64 scratch), from slot S[si..si+d). */
export function writeVector(variant: Variant, S: Data, si: number, k: Data, v: Data, o: number, d: number, out: Data): void {
  const src = variant === "encode" ? k : v;
  for (let j = 0; j < d; j++) out[j] = src[o + j]!;
  if (variant === "similarity") {
    // Only the part of v orthogonal to the slot moves it.
    const sv = K.dot(S, v, d, si, o);
    for (let j = 0; j < d; j++) out[j]! -= sv * S[si + j]!;
  }
}

/** Read weights w = softmax(S q_t) into w[wo..wo+m) and y_t = Σ_i w_i S[i] into y[o..o+d). */
export function readSlots(S: Data, so: number, m: number, d: number, q: Data, o: number, rho: Data,
  yt: Data, w: Data, wo: number, y: Data): void {
  K.matvec(S, so, m, d, q, o, rho, 0);
  K.softmaxRows(rho, 1, m, rho);
  for (let i = 0; i < m; i++) w[wo + i] = rho[i]!;
  // y is summed in f64 and stored once, so f32 rounds each output once
  K.matTvec(S, so, m, d, w, wo, yt, 0);
  for (let j = 0; j < d; j++) y[o + j] = yt[j]!;
}

/** VJP of the read: P[i] += w_i dy + dρ_i q (when P is given) and dq += Σ_i dρ_i S[i]. */
export function readSlotsVjp(S: Data, so: number, m: number, d: number, q: Data, o: number, w: Data, wo: number,
  dy: Data, dw: Data, P: Data | null, dq: Data): void {
  K.matvec(S, so, m, d, dy, o, dw, 0);
  let wdw = 0;
  for (let i = 0; i < m; i++) wdw += w[wo + i]! * dw[i]!;
  for (let i = 0; i < m; i++) {
    const wi = w[wo + i]!;
    const drho = wi * (dw[i]! - wdw);
    const si = so + i * d;
    for (let j = 0; j < d; j++) {
      dq[j]! += drho * S[si + j]!;
      if (P !== null) P[i * d + j]! += wi * dy[o + j]! + drho * q[o + j]!;
    }
  }
}

/** The flat Lattice tape: S_0..S_s [s+1, m, d], read weights, γ, p = S_t[i]·δ_i and ‖ũ_i‖ per token and slot. */
export interface LatticeTape { S: Data; readW: Data; gamma: Data; pDot: Data; uNorm: Data }

export type LatticeScratch = ReturnType<typeof latticeScratch>;

export function latticeScratch(m: number, d: number) {
  return {
    rho: accBuffer(m), yt: accBuffer(d), ut: accBuffer(d), dw: accBuffer(m),
    u: accBuffer(d), du: accBuffer(d), dut: accBuffer(d), dqt: accBuffer(d),
  };
}

/**
 * One token: the read, then every slot's write S_{t+1}[i] from S_t[i]. The data term δ_i (γ_i and u_i)
 * reads the slots of token `e`: the running state (e = t) in the rule, the chunk's first token in the
 * chunk form (docs/spec/chunk-forms.md#chunk-start-gd-lattice); the tangent projection and the
 * renormalisation always act on the running slot.
 */
export function latticeToken(tp: LatticeTape, { k, v, q, alpha }: InnerInputs, cfg: RuleConfig, t: number, e: number,
  sc: LatticeScratch, y: Data): void {
  const { S, readW, gamma, pDot, uNorm } = tp;
  const { rho, yt, u, ut } = sc;
  const d = cfg.d, m = cfg.m_slots as number, variant = cfg.variant as Variant, md = m * d;
  const st = t * md, sn = (t + 1) * md, se = e * md, o = t * d;
  readSlots(S, st, m, d, q.data, o, rho, yt, readW, t * m, y);
  const a = alpha!.data[t]!;
  for (let i = 0; i < m; i++) {
    const si = st + i * d, ei = se + i * d, ni = sn + i * d, ti = t * m + i;
    gamma[ti] = K.sigmoid(K.dot(S, k.data, d, ei, o));
    writeVector(variant, S, ei, k.data, v.data, o, d, u);
    const beta = a * gamma[ti]!;
    pDot[ti] = beta * K.dot(S, u, d, si, 0);
    const p = pDot[ti]!;
    for (let j = 0; j < d; j++) ut[j] = (1 - p) * S[si + j]! + beta * u[j]!;
    uNorm[ti] = Math.sqrt(K.dot(ut, ut, d));
    const n = uNorm[ti]!;
    if (n > FALLBACK) for (let j = 0; j < d; j++) S[ni + j] = ut[j]! / n;
    else for (let j = 0; j < d; j++) S[ni + j] = S[si + j]!;
  }
}

/** Runs every token from `state`; token t's data terms read the slots of token dataAt(t). */
export function latticeSweep(inp: InnerInputs, state: State, cfg: RuleConfig,
  dataAt: (t: number) => number): { y: Data; tape: LatticeTape } {
  const { d, seq_len: s } = cfg;
  const m = cfg.m_slots as number;
  const dt = inp.k.dtype, md = m * d;
  const S = alloc(dt, (s + 1) * md);
  S.set(state.S!.data);
  const readW = alloc(dt, s * m), gamma = alloc(dt, s * m), pDot = alloc(dt, s * m), uNorm = alloc(dt, s * m);
  const y = alloc(dt, s * d);
  const tape: LatticeTape = { S, readW, gamma, pDot, uNorm }, scratch = latticeScratch(m, d);
  for (let t = 0; t < s; t++) latticeToken(tape, inp, cfg, t, dataAt(t), scratch, y);
  return { y, tape };
}

/**
 * Exact backward of latticeToken for the same `e`. Sh = ∂L/∂S_{t+1}; P = ∂L/∂S_t (cleared and built
 * here); F receives the data term's adjoint w.r.t. the slots it read: P itself in the rule, a chunk
 * accumulator in the chunk form. dq_t lands in sc.dqt; dk_t, dv_t are added at dk[go..], dv[go..].
 * Returns dα_t.
 */
export function latticeTokenBackward(tp: LatticeTape, { k, v, q, alpha }: InnerInputs, cfg: RuleConfig, dy: Tensor,
  t: number, e: number, Sh: Data, P: Data, F: Data, sc: LatticeScratch, dk: Data, dv: Data, go: number): number {
  const { S, readW: W, gamma: G, pDot: Pd, uNorm: N } = tp;
  const { dw, u, du, dut, dqt } = sc;
  const d = cfg.d, m = cfg.m_slots as number, variant = cfg.variant as Variant, md = m * d;
  const st = t * md, sn = (t + 1) * md, se = e * md, o = t * d;
  P.fill(0);
  dqt.fill(0);
  readSlotsVjp(S, st, m, d, q.data, o, W, t * m, dy.data, dw, P, dqt);
  const a = alpha!.data[t]!;
  let da = 0;
  for (let i = 0; i < m; i++) {
    const si = st + i * d, ei = se + i * d, ni = sn + i * d, ti = t * m + i, pi = i * d;
    const n = N[ti]!;
    if (!(n > FALLBACK)) {
      // The forward copied S_t[i], so ∂L/∂S_{t+1}[i] passes straight through (D2); the data term is unused.
      for (let j = 0; j < d; j++) P[pi + j]! += Sh[pi + j]!;
      continue;
    }
    // dũ = (Ŝ[i] − s'(s'·Ŝ[i])) / n with s' = S_{t+1}[i]
    const sh = K.dot(S, Sh, d, ni, pi);
    for (let j = 0; j < d; j++) dut[j] = (Sh[pi + j]! - S[ni + j]! * sh) / n;
    const c = K.dot(dut, S, d, 0, si);
    const g = G[ti]!, p = Pd[ti]!, beta = a * g;
    writeVector(variant, S, ei, k.data, v.data, o, d, u);
    // ũ = (1 − p) S_t + δ, p = S_t·δ: the running slot gets (1 − p) dũ − c δ; δ gets dδ = dũ − c S_t
    let ddu = 0;
    for (let j = 0; j < d; j++) {
      const ddelta = dut[j]! - c * S[si + j]!;
      P[pi + j]! += (1 - p) * dut[j]! - c * beta * u[j]!;
      ddu = accStep(ddu + ddelta * u[j]!);
      du[j] = beta * ddelta;
    }
    da = accStep(da + g * ddu);
    // δ = α σ(S_e·k) u(S_e): everything below reaches the slot the data term read, i.e. F
    const dsc = a * ddu * g * (1 - g);
    if (variant === "decode") for (let j = 0; j < d; j++) dv[go + j]! += du[j]!;
    else if (variant === "encode") for (let j = 0; j < d; j++) dk[go + j]! += du[j]!;
    else {
      const c2 = K.dot(du, S, d, 0, ei), sv = K.dot(S, v.data, d, ei, o);
      for (let j = 0; j < d; j++) {
        dv[go + j]! += du[j]! - c2 * S[ei + j]!;
        F[pi + j]! -= sv * du[j]! + c2 * v.data[o + j]!;
      }
    }
    for (let j = 0; j < d; j++) {
      F[pi + j]! += dsc * k.data[o + j]!;
      dk[go + j]! += dsc * S[ei + j]!;
    }
  }
  return da;
}

const latticeFrozen: FrozenPair<"S" | "readW"> = {
  saved: ["S", "readW"],
  forward(q, state, cfg) {
    const { d, seq_len: s } = cfg;
    const m = cfg.m_slots as number;
    const S = state.S!;
    const readW = alloc(q.dtype, s * m), y = alloc(q.dtype, s * d);
    const rho = accBuffer(m), yt = accBuffer(d);
    for (let t = 0; t < s; t++) readSlots(S.data, 0, m, d, q.data, t * d, rho, yt, readW, t * m, y);
    return { y: new Tensor(q.dtype, [s, d], y), saved: { S, readW: new Tensor(q.dtype, [s, m], readW) } };
  },
  backward({ S, readW }, q, dy, cfg) {
    const { d, seq_len: s } = cfg;
    const m = cfg.m_slots as number;
    const dq = alloc(q.dtype, s * d);
    const dw = accBuffer(m), dqt = accBuffer(d), dS = accBuffer(m * d);
    for (let t = 0; t < s; t++) {
      dqt.fill(0);
      readSlotsVjp(S!.data, 0, m, d, q.data, t * d, readW!.data, t * m, dy.data, dw, dS, dqt);
      for (let j = 0; j < d; j++) dq[t * d + j] = dqt[j]!;
    }
    return { dq: new Tensor(q.dtype, [s, d], dq), dState: { S: gradTensor(q.dtype, [m, d], dS) } };
  },
};

export const lattice: RuleDecl<"lattice"> = {
  key: "lattice",
  sheet: "docs/spec/miras-compression.md#lattice",
  hyper: {
    m_slots: { kind: "int", default: 4, min: 1, max: 4096, sample: [1, 6], doc: "number of unit-norm slots m (§5.1)" },
    variant: { kind: "enum", default: "decode", values: VARIANTS, doc: "write vector u_i: v (decode), k (encode), v minus its slot component (similarity)" },
  },
  projection: "memory",
  gates: ["alpha"],
  normalizeKQ: false,
  omega: false,
  unread: (cfg) => (cfg.variant === "encode" ? ["v"] : []),
  stateShapes: (cfg) => ({ S: [cfg.m_slots as number, cfg.d] }),
  init(cfg, dtype) {
    const m = cfg.m_slots as number, d = cfg.d;
    const S = zeros(dtype, [m, d]);
    for (let i = 0; i < m * d; i++) S.data[i] = initHash(i) - 0.5;
    normalizeSlots(S.data, m, d);
    return { S };
  },
  randomState(cfg, dtype, rnd) {
    const m = cfg.m_slots as number, d = cfg.d;
    const S = zeros(dtype, [m, d]);
    for (let i = 0; i < m * d; i++) S.data[i] = rnd() - 0.5;
    normalizeSlots(S.data, m, d);
    return { S };
  },
  inner: {
    saved: ["sStates", "readW", "gamma", "pDot", "uNorm"],
    forward(inp, state, cfg) {
      const { d, seq_len: s } = cfg;
      const m = cfg.m_slots as number;
      const dt = inp.k.dtype, md = m * d;
      const { y, tape: { S, readW, gamma, pDot, uNorm } } = latticeSweep(inp, state, cfg, (t) => t);
      return {
        y: new Tensor(dt, [s, d], y),
        finalState: { S: new Tensor(dt, [m, d], S.slice(s * md)) },
        saved: {
          sStates: new Tensor(dt, [s + 1, m, d], S),
          readW: new Tensor(dt, [s, m], readW),
          gamma: new Tensor(dt, [s, m], gamma),
          pDot: new Tensor(dt, [s, m], pDot),
          uNorm: new Tensor(dt, [s, m], uNorm),
        },
      };
    },
    backward({ sStates, readW, gamma, pDot, uNorm }, inp, dy, cfg, dFinal) {
      const { d, seq_len: s } = cfg;
      const m = cfg.m_slots as number;
      const dt = inp.k.dtype, md = m * d;
      const tape: LatticeTape = { S: sStates!.data, readW: readW!.data, gamma: gamma!.data, pDot: pDot!.data, uNorm: uNorm!.data };
      const dk = alloc(dt, s * d), dv = alloc(dt, s * d), dq = alloc(dt, s * d), dalpha = alloc(dt, s);
      let Sh = adjointFrom(dFinal, "S", md); // Ŝ = ∂L/∂S_{t+1}
      let P = accBuffer(md); //  ∂L/∂S_t, built at token t; the data term reads S_t too, so F = P
      const scratch = latticeScratch(m, d), dkt = accBuffer(d), dvt = accBuffer(d);
      for (let t = s - 1; t >= 0; t--) {
        const o = t * d;
        dkt.fill(0); dvt.fill(0);
        dalpha[t] = latticeTokenBackward(tape, inp, cfg, dy, t, t, Sh, P, P, scratch, dkt, dvt, 0);
        for (let j = 0; j < d; j++) {
          dk[o + j] = dkt[j]!;
          dv[o + j] = dvt[j]!;
          dq[o + j] = scratch.dqt[j]!;
        }
        [Sh, P] = [P, Sh];
      }
      return {
        dk: new Tensor(dt, [s, d], dk), dv: new Tensor(dt, [s, d], dv), dq: new Tensor(dt, [s, d], dq),
        dalpha: new Tensor(dt, [s], dalpha),
        // after the last swap Ŝ holds P of t = 0: ∂L/∂S_0 (S_0 is used as given, never renormalised)
        dState0: { S: gradTensor(dt, [m, d], Sh) },
      };
    },
  },
  frozen: latticeFrozen,
  // Read before write: s = 1 never sees a write. d = 1: a unit slot is ±1 and never moves.
  // One slot: the read softmax is constant, so W_Q gets no gradient.
  checkMinimums: { d: 2, seq_len: 2, hyper: { m_slots: 2 } },
  invariants: VARIANTS.map((variant): Invariant => ({
    name: `slots stay unit-norm (${variant})`,
    spec: "docs/spec/miras-compression.md#lattice-state, docs/spec/miras-compression.md#lattice-forward, docs/spec/miras-compression.md#lattice-tests sphere_preserved: every slot of every state S_0..S_s has norm 1",
    check: (dtype, seed) => unitSlots(variant, dtype, seed),
  })),
};

/**
 * Runs the write from a unit init state, a random unit state and the zero state (§5.2 allows it; only
 * S_1.. are then unit) and checks every slot norm. f32 stores each entry once rounded, so its norm is
 * within about 2^-24 of 1; 1e-6 leaves room for that and nothing else.
 */
function unitSlots(variant: Variant, dtype: DType, seed: number): string | null {
  const rng = new Rng(seed);
  const d = 7, s = 12, m = 5;
  const cfg: RuleConfig = { d, seq_len: s, m_slots: m, variant };
  const tol = dtype === "f64" ? 1e-12 : 1e-6;
  const rand = (shape: number[], lo: number, hi: number): Tensor => {
    const t = zeros(dtype, shape);
    for (let i = 0; i < t.size; i++) t.data[i] = rng.uniform(lo, hi);
    return t;
  };
  const inp: InnerInputs = {
    k: rand([s, d], -2, 2), v: rand([s, d], -2, 2), q: rand([s, d], -1, 1), x: rand([s, d], -1, 1),
    alpha: rand([s], 0.01, 0.99),
  };
  const starts: [string, State, number][] = [
    ["init", lattice.init(cfg, dtype), 0],
    ["random", lattice.randomState(cfg, dtype, () => rng.next()), 0],
    ["zero", { S: zeros(dtype, [m, d]) }, 1],
  ];
  for (const [name, state, from] of starts) {
    const S = lattice.inner.forward(inp, state, cfg).saved.sStates!.data;
    for (let t = from; t <= s; t++) {
      for (let i = 0; i < m; i++) {
        const o = (t * m + i) * d;
        const n = Math.sqrt(K.dot(S, S, d, o, o));
        if (!(Math.abs(n - 1) <= tol)) return `${name} start: ‖S_${t}[${i}]‖ = ${n}, expected 1 within ${tol}`;
      }
    }
  }
  return null;
}
