/**
 * The generic level machinery, written once for every rule: projections, L2 row
 * normalisation (Delta/Titans), scalar gates from c_t = [k_t; v_t], Atlas' omega, the
 * rule's inner pair, and the shared backward tail (docs/spec/titans-family.md#projections, docs/spec/titans-family.md#gates,
 * docs/spec/miras-compression.md#outer-projections, docs/spec/miras-compression.md#backward-tail). A rule forward records ONE opaque block when traced.
 */
import * as K from "../numeric.ts";
import { activeTape, registerOpaque } from "../tape.ts";
import { Tensor, alloc, expectShape, zeros, type DType } from "../tensor.ts";
import type { InnerGrads, InnerInputs, InnerPair, Named, RuleConfig, RuleDecl, State } from "./types.ts";

const EPS = 1e-8;

/** Canonical per-level parameter names (docs/spec/names.md#layout). */
export const MEMORY_PARAMS = ["W_K", "W_V", "W_Q", "w_alpha", "b_alpha", "w_theta", "b_theta", "w_eta", "b_eta"] as const;
export const ATTENTION_PARAMS = ["W_q", "W_k", "W_v"] as const;

export function paramNames(decl: RuleDecl): string[] {
  if (decl.projection === "attention") return [...ATTENTION_PARAMS];
  return decl.omega ? [...MEMORY_PARAMS, "W_omega"] : [...MEMORY_PARAMS];
}

export function paramShapes(decl: RuleDecl, cfg: RuleConfig): Record<string, number[]> {
  const d = cfg.d;
  if (decl.projection === "attention") return { W_q: [d, d], W_k: [d, d], W_v: [d, d] };
  const s: Record<string, number[]> = {
    W_K: [d, d], W_V: [d, d], W_Q: [d, d],
    w_alpha: [2 * d], b_alpha: [1], w_theta: [2 * d], b_theta: [1], w_eta: [2 * d], b_eta: [1],
  };
  if (decl.omega) s.W_omega = [d, 2 * d];
  return s;
}

/** Parameters that get a gradient: the projections plus what the rule's gates and omega use. */
export function usedParams(decl: RuleDecl): string[] {
  if (decl.projection === "attention") return [...ATTENTION_PARAMS];
  const used = ["W_K", "W_V", "W_Q"];
  for (const g of decl.gates) used.push(`w_${g}`, `b_${g}`);
  if (decl.omega) used.push("W_omega");
  return used;
}

export type Params = Readonly<Record<string, Tensor>>;

/** Validates X, params and state against the declaration; errors name rule, tensor, expected and got. */
export function validateInputs(decl: RuleDecl, X: Tensor, params: Params, state: State, cfg: RuleConfig): void {
  const who = `rule '${decl.key}'`;
  expectShape(X, [cfg.seq_len, cfg.d], `${who}: X`);
  for (const [name, shape] of Object.entries(paramShapes(decl, cfg))) {
    const p = params[name];
    if (p === undefined) throw new Error(`${who}: parameter ${name} is missing`);
    expectShape(p, shape, `${who}: parameter ${name}`);
    if (p.dtype !== X.dtype) throw new Error(`${who}: parameter ${name} is ${p.dtype}, X is ${X.dtype}`);
  }
  for (const [name, shape] of Object.entries(decl.stateShapes(cfg))) {
    const t = state[name];
    if (t === undefined) throw new Error(`${who}: state ${name} is missing`);
    expectShape(t, shape, `${who}: state ${name}`);
  }
  for (const [name, spec] of Object.entries(decl.hyper)) {
    const v = cfg[name];
    if (v === undefined) throw new Error(`${who}: hyperparameter ${name} is missing`);
    if (spec.kind === "enum") {
      if (!spec.values.includes(String(v))) throw new Error(`${who}: ${name} = ${v}, expected one of ${spec.values.join("|")}`);
    } else if (typeof v !== "number" || v < spec.min || v > spec.max || (spec.kind === "int" && !Number.isInteger(v))) {
      throw new Error(`${who}: ${name} = ${v}, expected ${spec.kind} in [${spec.min}, ${spec.max}]`);
    } else if (spec.kind === "int" && spec.boundByD === "at-most" && v > cfg.d) {
      throw new Error(`${who}: ${name} = ${v} must be <= d = ${cfg.d}`);
    } else if (spec.kind === "int" && spec.boundByD === "divides" && cfg.d % v !== 0) {
      throw new Error(`${who}: ${name} = ${v} must divide d = ${cfg.d}`);
    }
  }
}

/** The configuration with every hyperparameter at its default unless given. */
export function withDefaults(decl: RuleDecl, cfg: { d: number; seq_len: number } & Record<string, number | string>): RuleConfig {
  const out: Record<string, number | string> = {};
  for (const [name, spec] of Object.entries(decl.hyper)) out[name] = spec.default;
  return { ...out, ...cfg } as RuleConfig;
}

// ── projections and gates ───────────────────────────────────────────────────

function project(X: Tensor, W: Tensor): Tensor {
  const [s, d] = X.shape as [number, number];
  const o = W.shape[0]!;
  return new Tensor(X.dtype, [s, o], K.matmulTB(X.data, W.data, s, d, o, alloc(X.dtype, s * o)));
}

function normalizeRows(x: Tensor): Tensor {
  const [s, d] = x.shape as [number, number];
  const out = alloc(x.dtype, x.size);
  for (let t = 0; t < s; t++) {
    const n = Math.max(Math.sqrt(K.dot(x.data, x.data, d, t * d, t * d)), EPS);
    for (let j = 0; j < d; j++) out[t * d + j] = x.data[t * d + j]! / n;
  }
  return new Tensor(x.dtype, x.shape, out);
}

function normalizeRowsVjp(raw: Tensor, y: Tensor, dy: Tensor): Tensor {
  const [s, d] = raw.shape as [number, number];
  const out = alloc(raw.dtype, raw.size);
  for (let t = 0; t < s; t++) {
    const o = t * d;
    const n = Math.sqrt(K.dot(raw.data, raw.data, d, o, o));
    if (n >= EPS) {
      const c = K.dot(dy.data, y.data, d, o, o);
      for (let j = 0; j < d; j++) out[o + j] = (dy.data[o + j]! - y.data[o + j]! * c) / n;
    } else {
      for (let j = 0; j < d; j++) out[o + j] = dy.data[o + j]! / EPS;
    }
  }
  return new Tensor(raw.dtype, raw.shape, out);
}

/** Gate pre-activation per token: b + w · [k_t; v_t]. */
function gatePre(k: Tensor, v: Tensor, w: Tensor, b: Tensor): Tensor {
  const [s, d] = k.shape as [number, number];
  const out = alloc(k.dtype, s);
  for (let t = 0; t < s; t++) {
    out[t] = b.data[0]! + K.dot(w.data, k.data, d, 0, t * d) + K.dot(w.data, v.data, d, d, t * d);
  }
  return new Tensor(k.dtype, [s], out);
}

function mapT(x: Tensor, f: (v: number) => number): Tensor {
  const out = alloc(x.dtype, x.size);
  for (let i = 0; i < out.length; i++) out[i] = f(x.data[i]!);
  return new Tensor(x.dtype, x.shape, out);
}

const GATE_FN = { alpha: K.sigmoid, theta: K.softplus, eta: K.sigmoid } as const;

/** silu([k_t; v_t]) per token, [s, 2d]. */
function siluKV(k: Tensor, v: Tensor): Tensor {
  const [s, d] = k.shape as [number, number];
  const out = alloc(k.dtype, s * 2 * d);
  for (let t = 0; t < s; t++) {
    for (let j = 0; j < d; j++) {
      out[t * 2 * d + j] = K.silu(k.data[t * d + j]!);
      out[t * 2 * d + d + j] = K.silu(v.data[t * d + j]!);
    }
  }
  return new Tensor(k.dtype, [s, 2 * d], out);
}

/** Names the level machinery saves for a rule (derived from the declaration, so declared once). */
export function levelSavedNames(decl: RuleDecl): string[] {
  const names = ["X", ...paramNames(decl), "k", "v", "q"];
  if (decl.normalizeKQ) names.push("k_raw", "q_raw");
  for (const g of decl.gates) names.push(g, `${g}_pre`);
  if (decl.omega) names.push("silu_c", "omega");
  return names;
}

interface LevelForward {
  inputs: InnerInputs;
  saved: Record<string, Tensor>;
}

function levelForward(decl: RuleDecl, X: Tensor, params: Params): LevelForward {
  const saved: Record<string, Tensor> = { X };
  for (const n of paramNames(decl)) saved[n] = params[n]!;
  if (decl.projection === "attention") {
    const q = project(X, params.W_q!), k = project(X, params.W_k!), v = project(X, params.W_v!);
    Object.assign(saved, { q, k, v });
    return { inputs: { k, v, q, x: X }, saved };
  }
  const kRaw = project(X, params.W_K!), v = project(X, params.W_V!), qRaw = project(X, params.W_Q!);
  const k = decl.normalizeKQ ? normalizeRows(kRaw) : kRaw;
  const q = decl.normalizeKQ ? normalizeRows(qRaw) : qRaw;
  Object.assign(saved, { k, v, q });
  if (decl.normalizeKQ) Object.assign(saved, { k_raw: kRaw, q_raw: qRaw });
  const inputs: { -readonly [P in keyof InnerInputs]: InnerInputs[P] } = { k, v, q, x: X };
  for (const g of decl.gates) {
    const pre = gatePre(k, v, params[`w_${g}`]!, params[`b_${g}`]!);
    const val = mapT(pre, GATE_FN[g]);
    saved[g] = val;
    saved[`${g}_pre`] = pre;
    inputs[g] = val;
  }
  if (decl.omega) {
    const sc = siluKV(k, v);
    saved.silu_c = sc;
    inputs.omega = saved.omega = project(sc, params.W_omega!);
  }
  return { inputs, saved };
}

function zerosLike(t: Tensor): Tensor {
  return zeros(t.dtype, t.shape);
}

/** The shared backward tail: gates, omega, normalisation, projections. Returns dX and every parameter's gradient. */
function levelBackward(decl: RuleDecl, saved: Named<string>, g: InnerGrads): Record<string, Tensor> {
  const X = saved.X!;
  const [s, d] = X.shape as [number, number];
  const dt = X.dtype;
  const out: Record<string, Tensor> = {};
  for (const [n, p] of Object.entries(paramsOf(decl, saved))) out[n] = zerosLike(p);
  const k = saved.k!, v = saved.v!;
  const dk = g.dk ? new Tensor(dt, [s, d], g.dk.data.slice()) : zeros(dt, [s, d]);
  const dv = g.dv ? new Tensor(dt, [s, d], g.dv.data.slice()) : zeros(dt, [s, d]);
  let dq = g.dq ?? zeros(dt, [s, d]);

  if (decl.projection === "memory") {
    const gateGrad = { alpha: g.dalpha, theta: g.dtheta, eta: g.deta };
    for (const gate of decl.gates) {
      const dGate = gateGrad[gate];
      if (dGate === undefined) continue;
      const val = saved[gate]!, pre = saved[`${gate}_pre`]!;
      const w = saved[`w_${gate}`]!;
      const dw = out[`w_${gate}`]!.data, db = out[`b_${gate}`]!.data;
      for (let t = 0; t < s; t++) {
        const y = val.data[t]!;
        // sigmoid' = y(1-y); softplus' = sigmoid(pre)
        const dPre = dGate.data[t]! * (gate === "theta" ? K.sigmoid(pre.data[t]!) : y * (1 - y));
        if (dPre === 0) continue;
        db[0]! += dPre;
        for (let j = 0; j < d; j++) {
          dw[j]! += dPre * k.data[t * d + j]!;
          dw[d + j]! += dPre * v.data[t * d + j]!;
          dk.data[t * d + j]! += dPre * w.data[j]!;
          dv.data[t * d + j]! += dPre * w.data[d + j]!;
        }
      }
    }
    if (decl.omega && g.domega !== undefined) {
      const sc = saved.silu_c!, W = saved.W_omega!;
      K.matmulTA(g.domega.data, sc.data, d, s, 2 * d, out.W_omega!.data);
      const dsc = K.matmul(g.domega.data, W.data, s, d, 2 * d, alloc(dt, s * 2 * d));
      for (let t = 0; t < s; t++) {
        for (let j = 0; j < d; j++) {
          dk.data[t * d + j]! += dsc[t * 2 * d + j]! * K.siluPrime(k.data[t * d + j]!);
          dv.data[t * d + j]! += dsc[t * 2 * d + d + j]! * K.siluPrime(v.data[t * d + j]!);
        }
      }
    }
  }

  let dkRaw = dk;
  if (decl.normalizeKQ) {
    dkRaw = normalizeRowsVjp(saved.k_raw!, k, dk);
    dq = normalizeRowsVjp(saved.q_raw!, saved.q!, dq);
  }
  const names = decl.projection === "attention" ? ["W_k", "W_v", "W_q"] : ["W_K", "W_V", "W_Q"];
  const dX = g.dx ? g.dx.data.slice() : alloc(dt, s * d);
  const tmp = alloc(dt, s * d);
  [dkRaw, dv, dq].forEach((dp, i) => {
    const W = saved[names[i]!]!;
    K.matmulTA(dp.data, X.data, d, s, d, out[names[i]!]!.data);
    K.matmul(dp.data, W.data, s, d, d, tmp);
    for (let j = 0; j < dX.length; j++) dX[j]! += tmp[j]!;
  });
  out.X = new Tensor(dt, [s, d], dX);
  return out;
}

function paramsOf(decl: RuleDecl, saved: Named<string>): Record<string, Tensor> {
  const p: Record<string, Tensor> = {};
  for (const n of paramNames(decl)) p[n] = saved[n]!;
  return p;
}

// ── the rule as one opaque block ────────────────────────────────────────────

interface RuleAttrs {
  readonly decl: RuleDecl;
  readonly cfg: RuleConfig;
  readonly inner: InnerPair<string>;
}

export interface RuleResult {
  readonly y: Tensor;
  readonly finalState: State;
}

/** Forward of the whole rule. `inner` defaults to the reference pair; a kernel backend may supply its own. */
export function ruleForwardSaved(decl: RuleDecl, X: Tensor, params: Params, state: State, cfg: RuleConfig,
  inner: InnerPair<string> = decl.inner): RuleResult & { saved: Record<string, Tensor> } {
  validateInputs(decl, X, params, state, cfg);
  const lv = levelForward(decl, X, params);
  const r = inner.forward(lv.inputs, state, cfg);
  const saved: Record<string, Tensor> = { ...lv.saved };
  for (const [n, t] of Object.entries(r.saved)) {
    if (n in saved) throw new Error(`rule '${decl.key}': inner saved name '${n}' collides with a level name`);
    saved[n] = t;
  }
  return { y: r.y, finalState: r.finalState, saved };
}

/** Hand-written backward of the whole rule (BPTT through the sequence): dX and every parameter. */
export function ruleBackward(decl: RuleDecl, saved: Named<string>, dy: Tensor, cfg: RuleConfig,
  inner: InnerPair<string> = decl.inner): Record<string, Tensor> {
  return ruleBackwardWithState(decl, saved, dy, cfg, inner).grads;
}

/**
 * ruleBackward that also takes ∂L/∂(final state) and returns ∂L/∂(initial state) as the inner
 * pair gives it (docs/spec/state-gradients.md#active); `dState0` is empty when the pair gives none.
 */
export function ruleBackwardWithState(decl: RuleDecl, saved: Named<string>, dy: Tensor, cfg: RuleConfig,
  inner: InnerPair<string> = decl.inner, dFinal?: State): { grads: Record<string, Tensor>; dState0: Record<string, Tensor> } {
  const innerSaved: Record<string, Tensor> = {};
  for (const n of inner.saved) innerSaved[n] = saved[n]!;
  const g = inner.backward(innerSaved, innerInputsOf(decl, saved), dy, cfg, dFinal);
  return { grads: levelBackward(decl, saved, g), dState0: g.dState0 ?? {} };
}

/** The inner pair's inputs, recovered from the level's saved tensors. */
function innerInputsOf(decl: RuleDecl, saved: Named<string>): InnerInputs {
  const inp: { -readonly [P in keyof InnerInputs]: InnerInputs[P] } = { k: saved.k!, v: saved.v!, q: saved.q!, x: saved.X! };
  for (const g of decl.gates) inp[g] = saved[g]!;
  if (decl.omega) inp.omega = saved.omega!;
  return inp;
}

/**
 * Rule forward: untraced it just computes; with an active tape it records one opaque block. The
 * block carries the state (initial state in, final state out) only when the caller put the
 * state on the tape (docs/spec/state-gradients.md#tape): a model's carried context stays untracked.
 */
export function ruleForward(decl: RuleDecl, X: Tensor, params: Params, state: State, cfg: RuleConfig,
  inner: InnerPair<string> = decl.inner): RuleResult {
  const r = ruleForwardSaved(decl, X, params, state, cfg, inner);
  const tape = activeTape();
  if (tape !== null) {
    const inputs: Record<string, Tensor> = { X, ...pick(params, paramNames(decl)) };
    const names = stateNames(decl);
    const withState = tape.anyTracked(names.map((n) => state[n]!));
    if (withState || tape.anyTracked(Object.values(inputs))) {
      const attrs: RuleAttrs = { decl, cfg, inner };
      const saved = pick(r.saved, savedNames(decl, inner));
      if (!withState) tape.recordOpaque(decl.key, inputs, { y: r.y }, saved, attrs);
      else {
        const outputs: Record<string, Tensor> = { y: r.y };
        for (const n of names) {
          inputs[initialStateName(n)] = state[n]!;
          outputs[finalStateName(n)] = r.finalState[n]!;
        }
        tape.recordOpaque(stateBlockKey(decl.key), inputs, outputs, saved, attrs);
      }
    }
  }
  return { y: r.y, finalState: r.finalState };
}

// ── state on the tape ───────────────────────────────────────────────────────

/** The rule's state names (stateShapes' keys; derived names such as Moneta's A1/A2 are not state). */
export function stateNames(decl: RuleDecl): string[] {
  return Object.keys(decl.stateShapes(withDefaults(decl, { d: 1, seq_len: 1 })));
}

/** The state entries a frozen read reads: the state names its pair saves (it saves what it reads). */
export function frozenStateNames(decl: RuleDecl): string[] {
  const saved = decl.frozen?.saved ?? [];
  return stateNames(decl).filter((n) => saved.includes(n));
}

/** Opaque input name of an initial state entry, and output name of a final one. */
export function initialStateName(n: string): string {
  return `state0.${n}`;
}
export function finalStateName(n: string): string {
  return `stateFinal.${n}`;
}

/** Key of the block recorded when the state is on the tape: `<rule>+state`, `<rule>.frozen+state`. */
export function stateBlockKey(key: string): string {
  return `${key}+state`;
}

function pick(rec: Readonly<Record<string, Tensor>>, names: readonly string[]): Record<string, Tensor> {
  const out: Record<string, Tensor> = {};
  for (const n of names) out[n] = rec[n]!;
  return out;
}

export function savedNames(decl: RuleDecl, inner: InnerPair<string> = decl.inner): string[] {
  return [...levelSavedNames(decl), ...inner.saved];
}

// ── frozen reads ────────────────────────────────────────────────────────────

/** A rule variant's key: `<rule>` for the active rule, `<rule>.frozen` for its frozen read. */
export function variantKey(key: string, frozen: boolean): string {
  return frozen ? `${key}.frozen` : key;
}

/** The inverse of variantKey. */
export function parseVariantKey(variant: string): { key: string; frozen: boolean } {
  const frozen = variant.endsWith(".frozen");
  return { key: frozen ? variant.slice(0, -".frozen".length) : variant, frozen };
}

export function frozenKey(decl: RuleDecl): string {
  return variantKey(decl.key, true);
}

/** Frozen read: q = X W_Q^T (no normalisation, D1), y = the rule's own read of the state. */
export function frozenForwardSaved(decl: RuleDecl, X: Tensor, params: Params, state: State, cfg: RuleConfig):
  { y: Tensor; saved: Record<string, Tensor> } {
  const fz = decl.frozen;
  if (fz === null) throw new Error(`rule '${decl.key}' has no frozen variant`);
  validateInputs(decl, X, params, state, cfg);
  const q = project(X, params.W_Q!);
  const r = fz.forward(q, state, cfg);
  return { y: r.y, saved: { X, W_Q: params.W_Q!, q, ...r.saved } };
}

/** Frozen VJP: of the parameters only X and W_Q receive gradient (D3). */
export function frozenBackward(decl: RuleDecl, saved: Named<string>, dy: Tensor, cfg: RuleConfig): { X: Tensor; W_Q: Tensor } {
  const { X, W_Q } = frozenBackwardWithState(decl, saved, dy, cfg);
  return { X, W_Q };
}

/** frozenBackward plus ∂L/∂(the state read) (docs/spec/state-gradients.md#frozen). */
export function frozenBackwardWithState(decl: RuleDecl, saved: Named<string>, dy: Tensor, cfg: RuleConfig):
  { X: Tensor; W_Q: Tensor; dState: Record<string, Tensor> } {
  const fz = decl.frozen!;
  const inner: Record<string, Tensor> = {};
  for (const n of fz.saved) inner[n] = saved[n]!;
  const { dq, dState } = fz.backward(inner, saved.q!, dy, cfg);
  const X = saved.X!, W = saved.W_Q!;
  const [s, d] = X.shape as [number, number];
  return {
    X: new Tensor(X.dtype, [s, d], K.matmul(dq.data, W.data, s, d, d, alloc(X.dtype, s * d))),
    W_Q: new Tensor(X.dtype, [d, d], K.matmulTA(dq.data, X.data, d, s, d, alloc(X.dtype, d * d))),
    dState,
  };
}

export function frozenForward(decl: RuleDecl, X: Tensor, params: Params, state: State, cfg: RuleConfig): Tensor {
  const r = frozenForwardSaved(decl, X, params, state, cfg);
  const tape = activeTape();
  if (tape === null) return r.y;
  const names = frozenStateNames(decl);
  const withState = tape.anyTracked(names.map((n) => state[n]!));
  if (withState) {
    const inputs: Record<string, Tensor> = { X, W_Q: params.W_Q! };
    for (const n of names) inputs[initialStateName(n)] = state[n]!;
    tape.recordOpaque(stateBlockKey(frozenKey(decl)), inputs, { y: r.y }, r.saved, { decl, cfg });
  } else if (tape.anyTracked([X, params.W_Q!])) {
    tape.recordOpaque(frozenKey(decl), { X, W_Q: params.W_Q! }, { y: r.y }, r.saved, { decl, cfg });
  }
  return r.y;
}

/** Registers the rule's opaque blocks (active and frozen) with the tape. */
export function registerRuleBlocks(decl: RuleDecl): void {
  registerOpaque({
    key: decl.key,
    inputs: ["X", ...paramNames(decl)],
    outputs: ["y"],
    saved: savedNames(decl),
    backward: (saved, dOut, attrs) => {
      const a = attrs as RuleAttrs;
      return ruleBackward(a.decl, saved, dOut.y!, a.cfg, a.inner);
    },
  });
  const fz = decl.frozen;
  if (fz !== null) {
    registerOpaque({
      key: frozenKey(decl),
      inputs: ["X", "W_Q"],
      outputs: ["y"],
      saved: ["X", "W_Q", "q", ...fz.saved],
      backward: (saved, dOut, attrs) => {
        const a = attrs as { decl: RuleDecl; cfg: RuleConfig };
        return frozenBackward(a.decl, saved, dOut.y!, a.cfg);
      },
    });
  }
  const names = stateNames(decl);
  if (names.length === 0) return;
  // The same blocks with the state as an input (and the final state as an output): recorded when
  // the caller put the state on the tape.
  registerOpaque({
    key: stateBlockKey(decl.key),
    inputs: ["X", ...paramNames(decl), ...names.map(initialStateName)],
    outputs: ["y", ...names.map(finalStateName)],
    saved: savedNames(decl),
    backward: (saved, dOut, attrs) => {
      const a = attrs as RuleAttrs;
      const dFinal: Record<string, Tensor> = {};
      for (const n of names) dFinal[n] = dOut[finalStateName(n)]!;
      const r = ruleBackwardWithState(a.decl, saved, dOut.y!, a.cfg, a.inner, dFinal);
      const out: Record<string, Tensor> = { ...r.grads };
      for (const [n, g] of Object.entries(r.dState0)) out[initialStateName(n)] = g;
      return out;
    },
  });
  if (fz !== null) {
    const read = frozenStateNames(decl);
    registerOpaque({
      key: stateBlockKey(frozenKey(decl)),
      inputs: ["X", "W_Q", ...read.map(initialStateName)],
      outputs: ["y"],
      saved: ["X", "W_Q", "q", ...fz.saved],
      backward: (saved, dOut, attrs) => {
        const a = attrs as { decl: RuleDecl; cfg: RuleConfig };
        const r = frozenBackwardWithState(a.decl, saved, dOut.y!, a.cfg);
        const out: Record<string, Tensor> = { X: r.X, W_Q: r.W_Q };
        for (const [n, g] of Object.entries(r.dState)) out[initialStateName(n)] = g;
        return out;
      },
    });
  }
}

export type { DType };
