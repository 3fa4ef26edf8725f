/**
 * The level around a rule's inner pair: projections, L2 row normalisation (Delta/Titans), scalar gates
 * from c_t = [k_t; v_t], Atlas' omega, and the shared backward tail (docs/spec/titans-family.md#projections,
 * docs/spec/titans-family.md#gates, docs/spec/miras-compression.md#outer-projections,
 * docs/spec/miras-compression.md#backward-tail).
 */
import * as K from "../numeric.ts";
import { Tensor, alloc, zeros } from "../tensor.ts";
import { auxParam, gateShape, type InnerGrads, type InnerInputs, type Named, type RuleDecl } from "./types.ts";
import { paramNames, type Params } from "./level-params.ts";

const EPS = 1e-8;

export function project(X: Tensor, W: Tensor): Tensor {
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

/** A channel gate's pre-activation per token and key channel: b_j + W_j · [k_t; v_t], [s, d]. */
function channelGatePre(k: Tensor, v: Tensor, W: Tensor, b: Tensor): Tensor {
  const [s, d] = k.shape as [number, number];
  const out = alloc(k.dtype, s * d);
  for (let t = 0; t < s; t++) {
    for (let j = 0; j < d; j++) {
      out[t * d + j] = b.data[j]! + K.dot(W.data, k.data, d, j * 2 * d, t * d) + K.dot(W.data, v.data, d, j * 2 * d + d, t * d);
    }
  }
  return new Tensor(k.dtype, [s, d], out);
}

/** t's data seen as rows of w values ([size / w, w]; the same memory). */
function byRow(t: Tensor, w: number): Tensor {
  return new Tensor(t.dtype, [t.size / w, w], t.data);
}

/**
 * Rows per token of k and v (tokenRows, docs/spec/titans-family.md#gated-delta-product-level): W_K's
 * rows over d; 1 for a rule without tokenRows.
 */
function kRows(decl: RuleDecl, WK: Tensor, d: number): number {
  if (decl.tokenRows === undefined) return 1;
  if (!decl.tokenRows.inputs.includes("k") || !decl.tokenRows.inputs.includes("v") || decl.omega) {
    throw new Error(`rule '${decl.key}': tokenRows must list k and v, and a rule with omega has one row per token`);
  }
  return WK.shape[0]! / d;
}

/** Whether gate g has a value per row of k (tokenRows lists it) rather than one per token. */
function isRowGate(decl: RuleDecl, g: string): boolean {
  return (decl.tokenRows?.inputs as readonly string[] | undefined)?.includes(g) ?? false;
}

/** The first of every token's n rows of x [s, n·d], as [s, d] (x itself when n = 1). */
function firstRows(x: Tensor, n: number, d: number): Tensor {
  if (n === 1) return x;
  const s = x.size / (n * d), out = alloc(x.dtype, s * d);
  for (let t = 0; t < s; t++) out.set(x.data.subarray(t * n * d, t * n * d + d), t * d);
  return new Tensor(x.dtype, [s, d], out);
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
  for (const n of decl.auxInputs ?? []) names.push(n, ...(decl.normalizeKQ ? [`${n}_raw`] : []));
  for (const g of decl.gates) names.push(g, `${g}_pre`);
  if (decl.omega) names.push("silu_c", "omega");
  return names;
}

interface LevelForward {
  inputs: InnerInputs;
  saved: Record<string, Tensor>;
}

export function levelForward(decl: RuleDecl, X: Tensor, params: Params): LevelForward {
  const saved: Record<string, Tensor> = { X };
  for (const n of paramNames(decl)) saved[n] = params[n]!;
  if (decl.projection === "attention") {
    const q = project(X, params.W_q!), k = project(X, params.W_k!), v = project(X, params.W_v!);
    Object.assign(saved, { q, k, v });
    return { inputs: { k, v, q, x: X }, saved };
  }
  const d = X.shape[1]!, n = kRows(decl, params.W_K!, d);
  const kRaw = project(X, params.W_K!), v = project(X, params.W_V!), qRaw = project(X, params.W_Q!);
  // with n rows per token each d-row of k is normalised on its own
  const k = decl.normalizeKQ ? new Tensor(kRaw.dtype, kRaw.shape, normalizeRows(byRow(kRaw, d)).data) : kRaw;
  const q = decl.normalizeKQ ? normalizeRows(qRaw) : qRaw;
  Object.assign(saved, { k, v, q });
  if (decl.normalizeKQ) Object.assign(saved, { k_raw: kRaw, q_raw: qRaw });
  const inputs: { -readonly [P in keyof InnerInputs]: InnerInputs[P] } = { k, v, q, x: X };
  for (const n of decl.auxInputs ?? []) {
    // Comba's p, DPLR's a and b: normalised as k is (the gates read k, not these)
    const raw = project(X, params[auxParam(n)]!);
    saved[n] = inputs[n] = decl.normalizeKQ ? normalizeRows(raw) : raw;
    if (decl.normalizeKQ) saved[`${n}_raw`] = raw;
  }
  for (const g of decl.gates) {
    // a row gate from each row's [k; v], [s, n]; any other gate from the token's first row
    const row = isRowGate(decl, g);
    const [kg, vg] = row ? [byRow(k, d), byRow(v, d)] : [firstRows(k, n, d), firstRows(v, n, d)];
    const pre0 = (gateShape(decl, g) === "channel" ? channelGatePre : gatePre)(kg, vg, params[`w_${g}`]!, params[`b_${g}`]!);
    const pre = row ? new Tensor(pre0.dtype, [pre0.size / n, n], pre0.data) : pre0;
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
export function levelBackward(decl: RuleDecl, saved: Named<string>, g: InnerGrads): Record<string, Tensor> {
  const X = saved.X!;
  const [s, d] = X.shape as [number, number];
  const dt = X.dtype;
  const out: Record<string, Tensor> = {};
  for (const [n, p] of Object.entries(paramsOf(decl, saved))) out[n] = zerosLike(p);
  const k = saved.k!, v = saved.v!;
  const n = kRows(decl, saved.W_K ?? saved.W_k!, d), nd = n * d;
  const dk = g.dk ? new Tensor(dt, [s, nd], g.dk.data.slice()) : zeros(dt, [s, nd]);
  const dv = g.dv ? new Tensor(dt, [s, nd], g.dv.data.slice()) : zeros(dt, [s, nd]);
  let dq = g.dq ?? zeros(dt, [s, d]);

  if (decl.projection === "memory") {
    const gateGrad = { alpha: g.dalpha, theta: g.dtheta, eta: g.deta };
    for (const gate of decl.gates) {
      const dGate = gateGrad[gate];
      if (dGate === undefined) continue;
      const val = saved[gate]!, pre = saved[`${gate}_pre`]!;
      const w = saved[`w_${gate}`]!;
      const dw = out[`w_${gate}`]!.data, db = out[`b_${gate}`]!.data;
      // gate value u reads the row of k and v at ko(u): its own row (a row gate), else its token's first
      const row = isRowGate(decl, gate), count = row ? s * n : s;
      const ko = (u: number) => (row ? u * d : u * nd);
      if (gateShape(decl, gate) === "channel") {
        // pre[t, j] = b_j + W_j · [k_t; v_t]: row j of W and entry j of b per key channel
        for (let t = 0; t < count; t++) {
          const o = ko(t);
          for (let c = 0; c < d; c++) {
            const y = val.data[t * d + c]!, p = pre.data[t * d + c]!;
            const dPre = dGate.data[t * d + c]! * (gate === "theta" ? K.sigmoid(p) : y * (1 - y));
            if (dPre === 0) continue;
            db[c]! += dPre;
            const r = c * 2 * d;
            for (let j = 0; j < d; j++) {
              dw[r + j]! += dPre * k.data[o + j]!;
              dw[r + d + j]! += dPre * v.data[o + j]!;
              dk.data[o + j]! += dPre * w.data[r + j]!;
              dv.data[o + j]! += dPre * w.data[r + d + j]!;
            }
          }
        }
        continue;
      }
      for (let t = 0; t < count; t++) {
        const y = val.data[t]!, o = ko(t);
        // sigmoid' = y(1-y); softplus' = sigmoid(pre)
        const dPre = dGate.data[t]! * (gate === "theta" ? K.sigmoid(pre.data[t]!) : y * (1 - y));
        if (dPre === 0) continue;
        db[0]! += dPre;
        for (let j = 0; j < d; j++) {
          dw[j]! += dPre * k.data[o + j]!;
          dw[d + j]! += dPre * v.data[o + j]!;
          dk.data[o + j]! += dPre * w.data[j]!;
          dv.data[o + j]! += dPre * w.data[d + j]!;
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
    dkRaw = n === 1 ? normalizeRowsVjp(saved.k_raw!, k, dk)
      : new Tensor(dt, [s, nd], normalizeRowsVjp(byRow(saved.k_raw!, d), byRow(k, d), byRow(dk, d)).data);
    dq = normalizeRowsVjp(saved.q_raw!, saved.q!, dq);
  }
  const dXaux: ReturnType<typeof alloc>[] = [];
  for (const n of decl.auxInputs ?? []) {
    const da = ({ p: g.dp, a: g.da, b: g.db } as const)[n] ?? zeros(dt, [s, d]);
    const daRaw = decl.normalizeKQ ? normalizeRowsVjp(saved[`${n}_raw`]!, saved[n]!, da) : da;
    K.matmulTA(daRaw.data, X.data, d, s, d, out[auxParam(n)]!.data);
    dXaux.push(K.matmul(daRaw.data, saved[auxParam(n)]!.data, s, d, d, alloc(dt, s * d)));
  }
  const names = decl.projection === "attention" ? ["W_k", "W_v", "W_q"] : ["W_K", "W_V", "W_Q"];
  const dX = g.dx ? g.dx.data.slice() : alloc(dt, s * d);
  const tmp = alloc(dt, s * d);
  [dkRaw, dv, dq].forEach((dp, i) => {
    const W = saved[names[i]!]!, rows = W.shape[0]!; // n·d for k and v with n rows per token
    K.matmulTA(dp.data, X.data, rows, s, d, out[names[i]!]!.data);
    K.matmul(dp.data, W.data, s, rows, d, tmp);
    for (let j = 0; j < dX.length; j++) dX[j]! += tmp[j]!;
  });
  for (const part of dXaux) for (let j = 0; j < dX.length; j++) dX[j]! += part[j]!;
  out.X = new Tensor(dt, [s, d], dX);
  return out;
}

export function paramsOf(decl: RuleDecl, saved: Named<string>): Record<string, Tensor> {
  const p: Record<string, Tensor> = {};
  for (const n of paramNames(decl)) p[n] = saved[n]!;
  return p;
}
