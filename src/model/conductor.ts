/**
 * Conductor and Pulse (docs/spec/titans-family.md#cms-pulse, docs/spec/decisions.md#d11): level l is active at step n iff
 * n % C_l == 0. "Observe then advance": every reader of a step sees the same pulse, and only
 * `advance()` moves to the next step. A step is one whole forward call over seq_len tokens.
 */

export interface Pulse {
  readonly step: number;
  readonly active: readonly boolean[];
}

export function pulseAt(step: number, chunkSizes: readonly number[]): Pulse {
  return { step, active: chunkSizes.map((c) => step % c === 0) };
}

export class Conductor {
  private n = 0;
  private readonly chunks: readonly number[];

  constructor(chunkSizes: readonly number[]) {
    if (chunkSizes.length === 0 || chunkSizes.some((c) => !Number.isInteger(c) || c < 1)) {
      throw new Error(`conductor: chunk sizes must be positive integers, got [${chunkSizes.join(", ")}]`);
    }
    this.chunks = [...chunkSizes];
  }

  get step(): number {
    return this.n;
  }

  /** The current step's pulse; reading it any number of times changes nothing. */
  pulse(): Pulse {
    return pulseAt(this.n, this.chunks);
  }

  advance(): void {
    this.n++;
  }
}
