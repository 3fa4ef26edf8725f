/** The shapes a kernel check ran, reported as `details.shapes` (docs/spec/conformance.md#shapes). */

/**
 * The shapes a kernel check ran (docs/spec/conformance.md#shapes): per dimension [min, max] over
 * its cases, and how many chunk boundaries its sequences crossed (a sequence of T tokens in chunks
 * of C crosses ⌊(T − 1)/C⌋; summed over every sequence of every case).
 */
export interface ShapesRan {
  T: [number, number];
  d: [number, number];
  H: [number, number];
  B: [number, number];
  chunk_boundaries_crossed: number;
  /**
   * Packed variable-length batches among the cases (docs/spec/py-backend.md#packed): how many, the
   * range of their sequence counts and every sequence length they packed (sorted); absent when none.
   */
  packed?: { batches: number; sequences: [number, number]; lengths: number[] };
}

/** Collects the shapes of a check's cases (reported as `details.shapes`). */
export class ShapeTally {
  private ran: ShapesRan | null = null;
  /** One batch of B·H sequences of T tokens, run in chunks of C. */
  add(s: { B: number; T: number; H: number; d: number }, C: number): void {
    this.record(s, s.B * s.H * crossings(s.T, C));
  }
  /**
   * One packed batch (B = 1, T = ΣL): its sequences count their own chunk boundaries, ⌊(L_i − 1)/C⌋
   * per sequence and head.
   */
  addPacked(s: { lengths: readonly number[]; H: number; d: number }, C: number): void {
    const T = s.lengths.reduce((a, b) => a + b, 0), N = s.lengths.length;
    this.record({ B: 1, T, H: s.H, d: s.d }, s.H * s.lengths.reduce((a, L) => a + crossings(L, C), 0));
    const old = this.ran!.packed;
    this.ran!.packed = {
      batches: (old?.batches ?? 0) + 1, sequences: span(old?.sequences, N),
      lengths: [...new Set([...(old?.lengths ?? []), ...s.lengths])].sort((a, b) => a - b),
    };
  }
  get shapes(): ShapesRan | null {
    return this.ran;
  }
  private record(s: { B: number; T: number; H: number; d: number }, crossed: number): void {
    const r = this.ran;
    this.ran = {
      ...r,
      T: span(r?.T, s.T), d: span(r?.d, s.d), H: span(r?.H, s.H), B: span(r?.B, s.B),
      chunk_boundaries_crossed: (r?.chunk_boundaries_crossed ?? 0) + crossed,
    };
  }
}

/** A [min, max] range widened to v. */
const span = (r: [number, number] | undefined, v: number): [number, number] => (r === undefined ? [v, v] : [Math.min(r[0], v), Math.max(r[1], v)]);
/** The chunk boundaries a sequence of T tokens crosses in chunks of C (an empty one none). */
const crossings = (T: number, C: number): number => (T < 1 ? 0 : Math.floor((T - 1) / Math.max(1, C)));

/** A finished check's result with the shapes its cases ran in `details.shapes`. */
export function withShapes<R extends { details?: Readonly<Record<string, unknown>> }>(r: R, tally: ShapeTally): R {
  const shapes = tally.shapes;
  return shapes === null ? r : { ...r, details: { ...(r.details ?? {}), shapes } };
}
