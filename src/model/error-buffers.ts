/**
 * Error buffers (docs/spec/decisions.md#d13, docs/spec/titans-family.md#cms-error-buffers): a frozen level's parameter gradient is
 * summed into its buffer; at the level's next active step, after that step's own gradient was
 * applied, params −= lr · buffer (the plain sum, not the mean) and the buffer is zeroed.
 */
import { Tensor, clone } from "../tensor.ts";
import { sgdInPlace, type TensorRecord } from "./params.ts";

export class ErrorBuffers {
  private readonly sums: Map<string, Tensor>[];
  private readonly counts: number[];

  constructor(k: number) {
    this.sums = Array.from({ length: k }, () => new Map());
    this.counts = new Array<number>(k).fill(0);
  }

  /** Steps accumulated since the buffer was last applied. */
  steps(l: number): number {
    return this.counts[l]!;
  }

  /** The buffer's current content (copies). */
  content(l: number): Record<string, Tensor> {
    return Object.fromEntries([...this.sums[l]!].map(([n, t]) => [n, clone(t)]));
  }

  accumulate(l: number, grads: TensorRecord): void {
    const sums = this.sums[l]!;
    for (const [n, g] of Object.entries(grads)) {
      const acc = sums.get(n);
      if (acc === undefined) sums.set(n, clone(g));
      else for (let i = 0; i < acc.size; i++) acc.data[i] = acc.data[i]! + g.data[i]!;
    }
    this.counts[l]!++;
  }

  /** params −= lr · buffer, then the buffer is empty. */
  applyAndReset(l: number, params: TensorRecord, lr: number): void {
    for (const [n, acc] of this.sums[l]!) {
      const p = params[n];
      if (p === undefined) throw new Error(`error buffer of level ${l}: no parameter ${n}`);
      sgdInPlace(p, acc, lr);
    }
    this.sums[l]!.clear();
    this.counts[l] = 0;
  }
}
