/**
 * Chunk forms of the matrix family (Delta, Titans, Hebbian, Atlas), written once from each
 * rule's `matrixChunk` declaration in tape ops, so a tape gives the exact backward of each form
 * (docs/spec/chunk-forms.md):
 *
 * - chunkStartGd: the step form, token by token, with the write direction u_t taken at the state
 *   of the chunk start (docs/spec/chunk-forms.md#chunk-start-gd). Retention and momentum run per
 *   token. With C = 1 it performs the rule's own arithmetic in the rule's order, so it equals the
 *   sequential forward bit for bit.
 * - exactChunked: the chunk-parallel algebra (docs/spec/chunk-forms.md#exact-chunked): the
 *   recurrence inside a chunk is unrolled into a coefficient table (ChunkCoefficients), and the
 *   errors of Delta/Titans come from one unit lower-triangular solve (the UT transform). Equal to
 *   the sequential rule up to rounding.
 *
 * Inputs are [s, d] (k, v, q, omega) and [s] (gates); state M (and S with momentum) is [d, d].
 */
import {
  add, chunkCoefficients, concat, gateScale, matmul, matmulTransposeB, mul, negate, rowScale, slice, sub, transpose, unitLowerSolve,
} from "../ops/index.ts";
import { Tensor, zeros } from "../tensor.ts";
import type { InnerInputs, MatrixChunkDecl, RuleDecl, State } from "./types.ts";
import { checkChunkSize } from "./chunk-start.ts";

export interface ChunkRun {
  y: Tensor;
  finalState: Record<string, Tensor>;
}

export function matrixChunkOf(decl: RuleDecl): MatrixChunkDecl {
  const m = decl.matrixChunk;
  if (m === undefined) throw new Error(`rule '${decl.key}' declares no matrixChunk: it has no matrix chunk form`);
  return m;
}

function rows(t: Tensor, start: number, len: number): Tensor {
  return slice([t], { axis: 0, start, len });
}

function checkChunk(C: number): void {
  checkChunkSize(C);
}

/** Chunk-start GD: u_t is evaluated at the state of the chunk's first token. */
export function chunkStartGd(decl: RuleDecl, inp: InnerInputs, state: State, C: number): ChunkRun {
  checkChunk(C);
  const m = matrixChunkOf(decl);
  const s = inp.k.shape[0]!;
  let M = state.M!, S = m.momentum ? state.S! : null;
  let Mc = M;
  const ys: Tensor[] = [];
  for (let t = 0; t < s; t++) {
    if (t % C === 0) Mc = M;
    const kr = rows(inp.k, t, 1);
    let u: Tensor;
    if (m.write === "error") u = transpose([sub([matmulTransposeB([kr, Mc], {}), rows(inp.v, t, 1)], {})], {});
    else u = transpose([rows(m.write === "v" ? inp.v : inp.omega!, t, 1)], {});
    // c_t u_t: −θ_t u_t, formed as (−θ)·u like the rules; Hebbian writes v_t unscaled.
    const cu = m.write === "v" ? u : gateScale([rows(inp.theta!, t, 1), u], { form: "-g" });
    const W = matmul([cu, kr], {});
    const retained = gateScale([rows(inp.alpha!, t, 1), M], { form: "1-g" });
    if (S !== null) {
      S = add([gateScale([rows(inp.eta!, t, 1), S], { form: "g" }), W], {});
      M = add([retained, S], {});
    } else {
      M = add([retained, W], {});
    }
    ys.push(matmulTransposeB([rows(inp.q, t, 1), M], {}));
  }
  return { y: concat(ys, { axis: 0 }), finalState: S === null ? { M } : { M, S } };
}

/** The exact chunk-parallel form with chunks of C tokens (the last one may be shorter). */
export function exactChunked(decl: RuleDecl, inp: InnerInputs, state: State, C: number): ChunkRun {
  checkChunk(C);
  const m = matrixChunkOf(decl);
  const s = inp.k.shape[0]!, dt = inp.k.dtype;
  let M = state.M!, S = m.momentum ? state.S! : null;
  const ys: Tensor[] = [];
  for (let c0 = 0; c0 < s; c0 += C) {
    const L = Math.min(C, s - c0);
    const r = chunkStep(m, sliceChunk(inp, c0, L), M, S, L, dt);
    ys.push(r.y);
    M = r.M;
    S = r.S;
  }
  return { y: concat(ys, { axis: 0 }), finalState: S === null ? { M } : { M, S } };
}

function sliceChunk(inp: InnerInputs, c0: number, L: number): InnerInputs {
  const out: Record<string, Tensor> = {};
  for (const n of ["k", "v", "q", "x", "alpha", "theta", "eta", "omega"] as const) {
    const t = inp[n];
    if (t !== undefined) out[n] = rows(t, c0, L);
  }
  return out as unknown as InnerInputs;
}

function ones(dt: Tensor["dtype"], L: number): Tensor {
  const t = zeros(dt, [L]);
  t.data.fill(1);
  return t;
}

/**
 * One chunk of L tokens from (M0, S0). With Γ the coefficient table (docs/spec/chunk-forms.md#exact-coefficients):
 *   M_t = Γ[t,0] M0 + Γ[t,1] S0 + Σ_i Γ[t,2+i] u_i k_iᵀ
 *   errors: e_t = Γ[t,0] M0 k_t + Γ[t,1] S0 k_t − v_t + Σ_{i<t} Γ[t,2+i] (k_i·k_t) e_i  → one unit lower solve
 *   y_t = M_{t+1} q_t ;  state out = row L of the M (and S) tables
 */
function chunkStep(m: MatrixChunkDecl, ck: InnerInputs, M0: Tensor, S0: Tensor | null, L: number, dt: Tensor["dtype"]):
  { y: Tensor; M: Tensor; S: Tensor | null } {
  const a = sub([ones(dt, L), ck.alpha!], {});
  const eta = S0 !== null ? ck.eta! : zeros(dt, [L]);
  const c = m.write === "v" ? ones(dt, L) : negate([ck.theta!], {});
  const CM = chunkCoefficients([a, eta, c], { of: "M" });
  const col = (T: Tensor, start: number, len: number) => slice([T], { axis: 1, start, len });
  const gM = col(CM, 0, 1), gS = col(CM, 1, 1), G = col(CM, 2, L);
  const lo = (T: Tensor) => rows(T, 0, L), hi = (T: Tensor) => rows(T, 1, L);

  let U: Tensor;
  if (m.write === "error") {
    let R = rowScale([matmulTransposeB([ck.k, M0], {}), lo(gM)], {});
    if (S0 !== null) R = add([R, rowScale([matmulTransposeB([ck.k, S0], {}), lo(gS)], {})], {});
    R = sub([R, ck.v], {});
    const A = mul([lo(G), matmulTransposeB([ck.k, ck.k], {})], {});
    U = unitLowerSolve([A, R], {});
  } else {
    U = m.write === "v" ? ck.v : ck.omega!;
  }
  let y = rowScale([matmulTransposeB([ck.q, M0], {}), hi(gM)], {});
  if (S0 !== null) y = add([y, rowScale([matmulTransposeB([ck.q, S0], {}), hi(gS)], {})], {});
  y = add([y, matmul([mul([hi(G), matmulTransposeB([ck.q, ck.k], {})], {}), U], {})], {});

  const Ut = transpose([U], {});
  const stateAt = (T: Tensor): Tensor => {
    const last = rows(T, L, 1);
    let X = gateScale([col(last, 0, 1), M0], { form: "g" });
    if (S0 !== null) X = add([X, gateScale([col(last, 1, 1), S0], { form: "g" })], {});
    return add([X, matmul([Ut, rowScale([ck.k, col(last, 2, L)], {})], {})], {});
  };
  const M = stateAt(CM);
  const S = S0 !== null ? stateAt(chunkCoefficients([a, eta, c], { of: "S" })) : null;
  return { y, M, S };
}
