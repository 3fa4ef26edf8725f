/** How the cross-check compares a torch tensor with the TypeScript one: relative difference over a floored scale. */
import { maxAbs } from "../../src/numeric.ts";
import { Tensor } from "../../src/tensor.ts";
import { C9 } from "../../oracle/precision-table.ts";

export interface Diff {
  readonly name: string;
  /** max|a − b| / max|b|; Infinity on a shape mismatch or a missing tensor; 0 when both are all zero. */
  readonly rel: number;
  readonly abs: number;
  readonly refMax: number;
  readonly note?: string;
  /**
   * How far rounding alone moves this tensor in this case: the TypeScript reference's natural sum
   * order against the reversed one (rule-cases.ts, `orderSpread`), set only where it raises the
   * allowance above the base tolerance; see `allowance`.
   */
  readonly spread?: number;
}

/**
 * An ill-conditioned tensor is allowed ORDER_FACTOR times its order spread: torch sums in yet
 * another order, and on correct implementations its difference from TypeScript stays within a
 * few spreads (measured: docs/spec/conformance.md#c9-conditioning). Never more than SPREAD_CAP:
 * above it no conditioning excuses a difference.
 */
export const ORDER_FACTOR = C9.orderFactor.value, SPREAD_CAP = C9.spreadCap.value;

/** The tolerance a tensor is judged at: the base tolerance, raised for an ill-conditioned tensor (capped). */
export function allowance(d: Pick<Diff, "spread">, tol: number): number {
  return d.spread === undefined ? tol : Math.max(tol, Math.min(SPREAD_CAP, d.spread * ORDER_FACTOR));
}

/** Marks the tensors whose order spread makes ORDER_FACTOR · spread exceed `tol`: they are judged at `allowance`. */
export function withConditioning(ds: readonly Diff[], spread: ReadonlyMap<string, number>, tol: number): Diff[] {
  return ds.map((d) => {
    const s = spread.get(d.name);
    return s !== undefined && s * ORDER_FACTOR > tol ? { ...d, spread: s } : d;
  });
}


export function diff(name: string, torch: Tensor | undefined, ts: Tensor | number | undefined): Diff {
  if (ts === undefined) return { name, rel: Infinity, abs: Infinity, refMax: 0, note: "missing in the TS reference" };
  if (torch === undefined) return { name, rel: Infinity, abs: Infinity, refMax: 0, note: "missing in the torch reply" };
  const b = typeof ts === "number" ? [ts] : ts.data;
  const a = torch.data;
  if (typeof ts !== "number" && ts.shape.join(",") !== torch.shape.join(",")) {
    return { name, rel: Infinity, abs: Infinity, refMax: 0, note: `shape torch [${torch.shape}] vs ts [${ts.shape}]` };
  }
  if (a.length !== b.length) return { name, rel: Infinity, abs: Infinity, refMax: 0, note: "length mismatch" };
  let abs = 0, nonFinite = 0;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!, y = b[i]!;
    // The same non-finite value on both sides (both implementations overflowed) is agreement.
    if (!Number.isFinite(x) || !Number.isFinite(y)) {
      if (Object.is(x, y)) {
        nonFinite++;
        continue;
      }
      abs = NaN;
      continue;
    }
    const e = Math.abs(x - y);
    if (!(e <= abs)) abs = e;
  }
  if (nonFinite > 0) {
    const rel = Number.isNaN(abs) ? NaN : 0;
    return { name, rel, abs, refMax: 0, note: `${nonFinite} non-finite entries in both` };
  }
  const refMax = maxAbs(b);
  const rel = abs === 0 ? 0 : refMax === 0 ? Infinity : abs / refMax;
  return { name, rel, abs, refMax };
}

/**
 * A tensor whose true value is (nearly) zero, e.g. a gate gradient that cancels exactly by a
 * symmetry, compares its rounding residue to itself; the reference scale of each tensor is
 * therefore at least FLOOR times the largest max|ts| of its group in the same case (y, final
 * state, gradients + error buffers, context, level outputs), and when a whole group is exactly
 * zero in the reference (e.g. Trellis' nsilu with dk = 1 is piecewise constant), FLOOR times the
 * largest max|ts| of the case (the case builders put y at unit scale).
 */
const FLOOR = C9.groupFloor.value;

function groupOf(name: string): string {
  if (name.startsWith("grads.") || name.startsWith("error_buffers.")) return "grads";
  return name.split(".")[0]!;
}

export function withFloor(ds: readonly Diff[]): Diff[] {
  const scale = new Map<string, number>();
  for (const d of ds) {
    const g = groupOf(d.name);
    if (Number.isFinite(d.refMax)) scale.set(g, Math.max(scale.get(g) ?? 0, d.refMax));
  }
  const caseMax = Math.max(0, ...scale.values());
  return ds.map((d) => {
    if (d.note !== undefined && d.refMax === 0 && !Number.isFinite(d.abs)) return d;
    if (d.note !== undefined && d.note.includes("non-finite")) return d;
    const ref = Math.max(d.refMax, FLOOR * (scale.get(groupOf(d.name)) || caseMax));
    const rel = d.abs === 0 ? 0 : ref === 0 ? Infinity : d.abs / ref;
    return { ...d, rel };
  });
}

export function scalar(x: number): Tensor {
  return new Tensor("f64", [], Float64Array.of(x));
}

/** The diff furthest over its allowance (`rel / allowance`): the one a verdict is about. */
export function worst(ds: readonly Diff[], tol = 1e-10): Diff | null {
  let w: Diff | null = null, wr = 0;
  for (const d of ds) {
    const r = d.rel / allowance(d, tol);
    if (w === null || !(r <= wr)) {
      w = d;
      wr = r;
    }
  }
  return w;
}

export function fmt(x: number): string {
  if (x === 0) return "0";
  if (!Number.isFinite(x)) return String(x);
  return x.toExponential(1);
}
