/**
 * The Wengert tape (spec tape.md). Recording is opt-in: ops consult `activeTape()` and
 * record only when a tape is active and one of their inputs is on it, so the same forward
 * code serves traced and untraced runs and computes the same bits either way.
 */
import { Tensor, alloc, clone, sameShape, shapeStr, type Data } from "./tensor.ts";

/** One recorded op: its VJP maps output gradients to input gradients (null = none). */
export interface TapeEntry {
  readonly op: string;
  readonly inputs: readonly Tensor[];
  readonly outputs: readonly Tensor[];
  vjp(dOutputs: readonly (Data | null)[]): readonly (Data | null)[];
}

type Named<K extends string> = { readonly [P in K]: Tensor };

/**
 * An opaque block: a forward computed outside the tape whose VJP is registered once.
 * Inputs, outputs and saved tensors are named; the names are declared here and nowhere else.
 */
export interface OpaqueDecl<I extends string = string, O extends string = string, S extends string = string> {
  readonly key: string;
  readonly inputs: readonly I[];
  readonly outputs: readonly O[];
  readonly saved: readonly S[];
  /** `attrs` is whatever non-tensor context the recorder passed (configuration, implementation). */
  backward(saved: Named<S>, dOutputs: Named<O>, attrs: unknown): Partial<Named<I>>;
}

const opaqueRegistry = new Map<string, OpaqueDecl>();

/** Registers an opaque block. A declaration without a backward is rejected here, not at backward time. */
export function registerOpaque<I extends string, O extends string, S extends string>(
  decl: OpaqueDecl<I, O, S>,
): OpaqueDecl<I, O, S> {
  if (typeof decl.backward !== "function") {
    throw new Error(`opaque block '${decl.key}' has no backward: registration rejected`);
  }
  const existing = opaqueRegistry.get(decl.key);
  if (existing !== undefined && existing !== (decl as unknown as OpaqueDecl)) {
    throw new Error(`opaque block '${decl.key}' is already registered`);
  }
  opaqueRegistry.set(decl.key, decl as unknown as OpaqueDecl);
  return decl;
}

export function opaqueKeys(): string[] {
  return [...opaqueRegistry.keys()];
}

let active: Tape | null = null;

export function activeTape(): Tape | null {
  return active;
}

/** Runs fn with a fresh tape active; the tape is inactive again afterwards, whatever happens. */
export function withTape<R>(fn: (tape: Tape) => R): R {
  if (active !== null) throw new Error("a tape is already active: tapes do not nest");
  const tape = new Tape();
  active = tape;
  try {
    return fn(tape);
  } finally {
    active = null;
  }
}

export class Tape {
  private readonly entries: TapeEntry[] = [];
  private readonly onTape = new Set<Tensor>();
  private readonly held = new Set<Data>();
  private readonly grads = new Map<Tensor, Data>();
  private readonly owned = new Set<Data>();
  private used = false;

  /** Registers a parameter or input: the tape keeps a snapshot, later writes to `t` do not reach it. */
  param(t: Tensor): Tensor {
    const snap = clone(t);
    this.onTape.add(snap);
    this.hold(snap);
    return snap;
  }

  /** Same as param: inputs are snapshotted too. */
  input(t: Tensor): Tensor {
    return this.param(t);
  }

  tracks(t: Tensor): boolean {
    return this.onTape.has(t);
  }

  anyTracked(ts: readonly Tensor[]): boolean {
    for (const t of ts) if (this.onTape.has(t)) return true;
    return false;
  }

  get length(): number {
    return this.entries.length;
  }

  record(entry: TapeEntry): void {
    if (this.used) throw new Error("tape already ran backward: it is single-use");
    this.entries.push(entry);
    for (const o of entry.outputs) {
      this.onTape.add(o);
      this.hold(o);
    }
  }

  /** Records an opaque block registered under `key`; its saved tensors must match the declaration exactly. */
  recordOpaque(key: string, inputs: Named<string>, outputs: Named<string>, saved: Named<string>, attrs?: unknown): void {
    const decl = opaqueRegistry.get(key);
    if (decl === undefined) throw new Error(`opaque block '${key}' is not registered`);
    checkNames(`opaque '${key}' inputs`, decl.inputs, inputs);
    checkNames(`opaque '${key}' outputs`, decl.outputs, outputs);
    checkNames(`opaque '${key}' saved`, decl.saved, saved);
    for (const s of Object.values(saved)) this.hold(s);
    const inNames = decl.inputs;
    const outNames = decl.outputs;
    this.record({
      op: `Opaque(${key})`,
      inputs: inNames.map((n) => inputs[n]!),
      outputs: outNames.map((n) => outputs[n]!),
      vjp: (dOuts) => {
        const named: Record<string, Tensor> = {};
        outNames.forEach((n, i) => {
          const o = outputs[n]!;
          named[n] = new Tensor(o.dtype, o.shape, dOuts[i] ?? alloc(o.dtype, o.size));
        });
        const dIn = decl.backward(saved, named, attrs);
        return inNames.map((n) => {
          const g = dIn[n];
          if (g === undefined) return null;
          if (!sameShape(g.shape, inputs[n]!.shape)) {
            throw new Error(`opaque '${key}' backward: gradient of ${n} has shape ${shapeStr(g.shape)}, input has ${shapeStr(inputs[n]!.shape)}`);
          }
          return g.data;
        });
      },
    });
  }

  /**
   * Reverse replay. With no seed, `out` must be a scalar (seeded with 1); otherwise the seed is
   * the upstream gradient of `out`. A tape runs backward once.
   */
  backward(out: Tensor, seed?: Tensor): void {
    if (this.used) throw new Error("tape already ran backward: it is single-use");
    if (!this.onTape.has(out)) throw new Error("backward: the output is not on this tape");
    this.used = true;
    let g: Data;
    if (seed === undefined) {
      if (out.size !== 1) throw new Error(`backward without a seed needs a scalar output, got shape ${shapeStr(out.shape)}`);
      g = alloc(out.dtype, 1);
      g[0] = 1;
    } else {
      if (!sameShape(seed.shape, out.shape)) {
        throw new Error(`backward: seed shape ${shapeStr(seed.shape)} differs from output shape ${shapeStr(out.shape)}`);
      }
      g = seed.data.slice();
    }
    this.grads.set(out, g);
    this.owned.add(g);
    for (let e = this.entries.length - 1; e >= 0; e--) {
      const entry = this.entries[e]!;
      let any = false;
      const dOuts = entry.outputs.map((o) => {
        const d = this.grads.get(o) ?? null;
        if (d !== null) any = true;
        return d;
      });
      if (!any) continue;
      const dIns = entry.vjp(dOuts);
      entry.inputs.forEach((inp, i) => {
        const d = dIns[i];
        if (d === null || d === undefined || !this.onTape.has(inp)) return;
        const acc = this.grads.get(inp);
        if (acc === undefined) {
          // A VJP may pass an upstream gradient through (Add) or return one array twice:
          // an array the map already owns is copied before it becomes an accumulator.
          const own = this.owned.has(d) ? d.slice() : d;
          this.owned.add(own);
          this.grads.set(inp, own);
        } else {
          for (let j = 0; j < acc.length; j++) acc[j]! += d[j]!;
        }
      });
    }
  }

  /** The accumulated gradient of a tensor on the tape, or null if no path reached it. */
  grad(t: Tensor): Tensor | null {
    const g = this.grads.get(t);
    return g === undefined ? null : new Tensor(t.dtype, t.shape, g);
  }

  /** Bytes of tensor storage the tape holds (snapshots, op outputs, saved tensors). */
  bytes(): number {
    let n = 0;
    for (const d of this.held) n += d.byteLength;
    return n;
  }

  private hold(t: Tensor): void {
    this.held.add(t.data);
  }

}

function checkNames(what: string, declared: readonly string[], given: Named<string>): void {
  const got = Object.keys(given).sort();
  const want = [...declared].sort();
  if (got.length !== want.length || got.some((n, i) => n !== want[i])) {
    throw new Error(`${what}: declared {${want.join(", ")}}, given {${got.join(", ")}}`);
  }
}
