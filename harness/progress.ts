/**
 * Progress of a run: elapsed time and an ETA from the measured check times (the table sharding
 * uses), scaled by how this run's pace compares with it. On a terminal one live line at the bottom
 * (redrawn after each check, cleared around other output); otherwise a plain line every ~5 s.
 */
import type { CheckDef } from "./check.ts";
import { estimates, loadTimes } from "./shard.ts";

const PLAIN_EVERY_MS = 5_000;
const BAR_WIDTH = 24;

export interface ProgressSink {
  isTTY: boolean;
  columns: number;
  write(s: string): void;
}

function stderrSink(): ProgressSink {
  return {
    isTTY: process.stderr.isTTY === true,
    columns: process.stderr.columns ?? 100,
    write: (s) => void process.stderr.write(s),
  };
}

export function formatSeconds(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  return s < 60 ? `${s} s` : `${Math.floor(s / 60)} min ${String(s % 60).padStart(2, "0")} s`;
}

export class Progress {
  private readonly est: Map<string, number>;
  private readonly total: number;
  private readonly t0: number;
  private done = 0;
  private doneEst = 0;
  private remainingEst: number;
  private lastPlain: number;
  private barShown = false;

  constructor(defs: readonly CheckDef[], private readonly sink: ProgressSink = stderrSink(),
    private readonly now: () => number = () => performance.now()) {
    this.est = estimates(defs, loadTimes());
    this.total = defs.length;
    this.remainingEst = [...this.est.values()].reduce((a, b) => a + b, 0);
    this.t0 = now();
    this.lastPlain = this.t0;
  }

  /**
   * Milliseconds left: the table's estimate for what is left, at this run's pace so far. The pace
   * is trusted once a tenth of the estimated work is done; before that the elapsed time is mostly
   * start-up (imports, builds, probes) and would multiply the estimate many times over, so the
   * table's own estimate stands.
   */
  eta(): number {
    const elapsed = this.now() - this.t0;
    const total = this.doneEst + this.remainingEst;
    const trusted = this.doneEst > 0 && elapsed > 0 && this.doneEst >= total / 10;
    const pace = trusted ? elapsed / this.doneEst : 1;
    return this.remainingEst * pace;
  }

  status(): string {
    return `${this.done}/${this.total} checks, elapsed ${formatSeconds(this.now() - this.t0)}, ETA ${this.done === 0 ? "?" : formatSeconds(this.eta())}`;
  }

  /** Prints a line of the run's own output without tearing the live line. */
  print(line: string, out: (s: string) => void = console.log): void {
    this.clear();
    out(line);
  }

  /** Before a check that may print on its own (a child process, a build): no live line under it. */
  clear(): void {
    if (this.barShown) this.sink.write("\r\x1b[2K");
    this.barShown = false;
  }

  /** After a check: count it, then redraw the live line, or print a plain line when ~5 s passed. */
  finished(id: string, next?: string): void {
    const e = this.est.get(id) ?? 0;
    this.done++;
    this.doneEst += e;
    this.remainingEst = Math.max(0, this.remainingEst - e);
    if (this.sink.isTTY) {
      const filled = this.total === 0 ? BAR_WIDTH : Math.round((this.done / this.total) * BAR_WIDTH);
      const bar = `[${"#".repeat(filled)}${".".repeat(BAR_WIDTH - filled)}] ${this.status()}${next ? `  ${next}` : ""}`;
      this.sink.write(`\r\x1b[2K${bar.slice(0, Math.max(20, this.sink.columns - 1))}`);
      this.barShown = true;
    } else if (this.now() - this.lastPlain >= PLAIN_EVERY_MS && this.done < this.total) {
      this.lastPlain = this.now();
      this.sink.write(`progress: ${this.status()}\n`);
    }
  }

  end(): void {
    this.clear();
  }
}

/**
 * Text from files or child processes as it may be printed: control characters (a NUL from a
 * corrupt file, an escape sequence) are shown escaped (\x00, \x1b), never written raw to a
 * terminal or a log. Newlines and tabs stay.
 */
export function printable(text: string): string {
  return text.replace(/[\x00-\x08\x0b-\x1f\x7f-\x9f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`);
}
