/**
 * Tape ops for the chunk forms of the matrix rules (docs/spec/chunk-forms.md, docs/spec/tape.md#ops):
 * a gate scalar times a tensor, per-row scaling, the coefficient table of a gated linear
 * recurrence inside a chunk, and a unit lower-triangular solve. Each declares its VJP and a
 * sampler, so C0 checks each against finite differences like every other op.
 */
import { Tensor, alloc, shapeStr, type Data } from "../tensor.ts";
import { defineOp } from "./define.ts";

function need(cond: boolean, op: string, msg: () => string): void {
  if (!cond) throw new Error(`${op}: ${msg()}`);
}

export type GateForm = "g" | "-g" | "1-g";

function coef(form: GateForm, g: number): number {
  return form === "g" ? g : form === "-g" ? -g : 1 - g;
}

/**
 * out = c(g)·x with c(g) = g, −g or 1 − g and g a one-element tensor (a token's gate). The
 * product is written c·x, the order the rules use, so the step forms reproduce their bits.
 */
export const gateScale = defineOp<{ form: GateForm }>({
  name: "GateScale",
  forward([g, x], { form }) {
    need(g!.size === 1, "GateScale", () => `gate must have one element, got shape ${shapeStr(g!.shape)}`);
    const c = coef(form, g!.data[0]!);
    const out = alloc(x!.dtype, x!.size);
    for (let i = 0; i < out.length; i++) out[i] = c * x!.data[i]!;
    return new Tensor(x!.dtype, x!.shape, out);
  },
  vjp([g, x], _o, d, { form }) {
    const c = coef(form, g!.data[0]!);
    const dx = alloc(x!.dtype, x!.size);
    let dot = 0;
    for (let i = 0; i < dx.length; i++) {
      dx[i] = c * d[i]!;
      dot += d[i]! * x!.data[i]!;
    }
    const dg = alloc(g!.dtype, 1);
    dg[0] = form === "g" ? dot : -dot;
    return [dg, dx];
  },
  sample(g) {
    const form = (["g", "-g", "1-g"] as const)[g.int(0, 2)]!;
    return { shapes: [[1], [g.int(1, 5), g.int(1, 5)]], domains: ["real", "real"], attrs: { form } };
  },
  oracle: "fd",
});

/** out[t, ...] = s[t]·x[t, ...]: per-row scaling by a vector with one entry per row. */
export const rowScale = defineOp<{}>({
  name: "RowScale",
  forward([x, s]) {
    const rows = x!.shape[0]!;
    need(s!.size === rows, "RowScale", () => `scale has ${s!.size} entries, x has ${rows} rows (shape ${shapeStr(x!.shape)})`);
    const w = x!.size / Math.max(rows, 1);
    const out = alloc(x!.dtype, x!.size);
    for (let t = 0; t < rows; t++) for (let j = 0; j < w; j++) out[t * w + j] = s!.data[t]! * x!.data[t * w + j]!;
    return new Tensor(x!.dtype, x!.shape, out);
  },
  vjp([x, s], _o, d) {
    const rows = x!.shape[0]!, w = x!.size / Math.max(rows, 1);
    const dx = alloc(x!.dtype, x!.size), ds = alloc(s!.dtype, s!.size);
    for (let t = 0; t < rows; t++) {
      let acc = 0;
      for (let j = 0; j < w; j++) {
        dx[t * w + j] = s!.data[t]! * d[t * w + j]!;
        acc += d[t * w + j]! * x!.data[t * w + j]!;
      }
      ds[t] = acc;
    }
    return [dx, ds];
  },
  sample(g) {
    const r = g.int(1, 6);
    return { shapes: [[r, g.int(1, 5)], [r]], domains: ["real", "real"], attrs: {} };
  },
  oracle: "fd",
});

/**
 * The coefficient table of the gated linear recurrence inside a chunk of L tokens
 * (docs/spec/chunk-forms.md#exact-coefficients):
 *   S_{t+1} = η_t S_t + c_t W_t ;  M_{t+1} = a_t M_t + S_{t+1}
 * with W_t = u_t k_tᵀ. Row t (0..L) of the output gives M_t (attr of = "M") or S_t (of = "S") as
 *   coef[t,0]·M_0 + coef[t,1]·S_0 + Σ_i coef[t,2+i]·W_i.
 * η = 0 gives the momentum-free recurrence M_{t+1} = a_t M_t + c_t W_t.
 */
export const chunkCoefficients = defineOp<{ of: "M" | "S" }>({
  name: "ChunkCoefficients",
  forward([a, eta, c], { of }) {
    const L = a!.size;
    need(eta!.size === L && c!.size === L, "ChunkCoefficients", () => `a, eta, c must have one entry per token (${L}, ${eta!.size}, ${c!.size})`);
    const { m, s } = coefficientRuns(a!.data, eta!.data, c!.data);
    return new Tensor(a!.dtype, [L + 1, L + 2], (of === "M" ? m : s).slice() as Data);
  },
  vjp([a, eta, c], _o, d, { of }) {
    const L = a!.size, cols = L + 2;
    const A = a!.data, H = eta!.data, Cg = c!.data;
    const { m, s } = coefficientRuns(A, H, Cg);
    const da = alloc(a!.dtype, L), dh = alloc(a!.dtype, L), dc = alloc(a!.dtype, L);
    for (let j = 0; j < cols; j++) {
      let gm = 0, gs = 0;
      for (let t = L; t >= 1; t--) {
        if (of === "M") gm += d[t * cols + j]!;
        else gs += d[t * cols + j]!;
        // m_t = a m_{t−1} + s_t ;  s_t = η s_{t−1} + c [j = 2 + t − 1]
        const gsTot = gs + gm;
        da[t - 1]! += gm * m[(t - 1) * cols + j]!;
        dh[t - 1]! += gsTot * s[(t - 1) * cols + j]!;
        if (j === t + 1) dc[t - 1]! += gsTot;
        gm = A[t - 1]! * gm;
        gs = H[t - 1]! * gsTot;
      }
    }
    return [da, dh, dc];
  },
  sample(g) {
    const L = g.int(1, 6), of = g.bool() ? "M" : "S";
    // S is η's and c's alone: a does not reach it
    return { shapes: [[L], [L], [L]], domains: ["real", "real", "real"], attrs: { of }, constant: of === "S" ? [0] : [] };
  },
  oracle: "fd",
});

/** Runs the scalar recurrence once per source column; m and s are [L+1, L+2] row-major. */
function coefficientRuns(A: Data, H: Data, Cg: Data): { m: Float64Array; s: Float64Array } {
  const L = A.length, cols = L + 2;
  const m = new Float64Array((L + 1) * cols), s = new Float64Array((L + 1) * cols);
  m[0] = 1;
  s[1] = 1;
  for (let t = 0; t < L; t++) {
    for (let j = 0; j < cols; j++) {
      const sn = H[t]! * s[t * cols + j]! + (j === t + 2 ? Cg[t]! : 0);
      s[(t + 1) * cols + j] = sn;
      m[(t + 1) * cols + j] = A[t]! * m[t * cols + j]! + sn;
    }
  }
  return { m, s };
}

/**
 * E = (I − strictly-lower(A))⁻¹ R by forward substitution: E_t = R_t + Σ_{i<t} A[t,i] E_i.
 * Entries of A on and above the diagonal are ignored (their gradient is 0).
 */
export const unitLowerSolve = defineOp<{}>({
  name: "UnitLowerSolve",
  forward([A, R]) {
    const L = R!.shape[0]!;
    need(A!.shape.length === 2 && A!.shape[0] === L && A!.shape[1] === L, "UnitLowerSolve",
      () => `A must be [${L}, ${L}] for R ${shapeStr(R!.shape)}, got ${shapeStr(A!.shape)}`);
    const w = R!.size / Math.max(L, 1);
    const E = alloc(R!.dtype, R!.size);
    for (let t = 0; t < L; t++) {
      for (let j = 0; j < w; j++) {
        let acc = R!.data[t * w + j]!;
        for (let i = 0; i < t; i++) acc += A!.data[t * L + i]! * E[i * w + j]!;
        E[t * w + j] = acc;
      }
    }
    return new Tensor(R!.dtype, R!.shape, E);
  },
  vjp([A, R], E, d) {
    const L = R!.shape[0]!, w = R!.size / Math.max(L, 1);
    // G = (I − L)⁻ᵀ d by back substitution; dR = G, dA[t,i] = G_t · E_i below the diagonal.
    const G = alloc(R!.dtype, R!.size);
    for (let t = L - 1; t >= 0; t--) {
      for (let j = 0; j < w; j++) {
        let acc = d[t * w + j]!;
        for (let k = t + 1; k < L; k++) acc += A!.data[k * L + t]! * G[k * w + j]!;
        G[t * w + j] = acc;
      }
    }
    const dA = alloc(A!.dtype, A!.size);
    for (let t = 0; t < L; t++) {
      for (let i = 0; i < t; i++) {
        let acc = 0;
        for (let j = 0; j < w; j++) acc += G[t * w + j]! * E.data[i * w + j]!;
        dA[t * L + i] = acc;
      }
    }
    return [dA, G];
  },
  sample(g) {
    const L = g.int(1, 5);
    return { shapes: [[L, L], [L, g.int(1, 4)]], domains: ["real", "real"], attrs: {} };
  },
  oracle: "fd",
});
