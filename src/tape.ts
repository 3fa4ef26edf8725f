/**
 * The Wengert tape (docs/spec/tape.md). Recording is opt-in: ops consult `activeTape()` and
 * record only when a tape is active and one of their inputs is on it, so the same forward
 * code serves traced and untraced runs and computes the same bits either way.
 */
import { buildRecomputePlan, runRecomputePlan, STORE_ALL, type RecomputeDecl, type RecomputePlan, type SavePolicy } from "./recompute.ts";
import { Tensor, alloc, clone, sameShape, shapeStr, type Data } from "./tensor.ts";

/** One recorded op: its VJP maps output gradients to input gradients (null = none). */
export interface TapeEntry {
  readonly op: string;
  readonly inputs: readonly Tensor[];
  readonly outputs: readonly Tensor[];
  vjp(dOutputs: readonly (Data | null)[]): readonly (Data | null)[];
}

type Named<K extends string> = { readonly [P in K]: Tensor };

export type OpVjp<A> = (inputs: readonly Tensor[], out: Tensor, dOut: Data, attrs: A) => readonly (Data | null)[];

class OpEntry implements TapeEntry {
  readonly outputs: readonly Tensor[];
  constructor(
    readonly op: string,
    private readonly fn: OpVjp<unknown>,
    readonly inputs: readonly Tensor[],
    out: Tensor,
    private readonly attrs: unknown,
  ) {
    this.outputs = [out];
  }
  vjp(dOutputs: readonly (Data | null)[]): readonly (Data | null)[] {
    return this.fn(this.inputs, this.outputs[0]!, dOutputs[0]!, this.attrs);
  }
}

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
  /**
   * Optional: which saved tensors a recompute policy keeps and which producers rebuild the rest
   * (docs/spec/tape.md#recompute). The plan is built, and checked, at registration.
   */
  readonly recompute?: RecomputeDecl;
}

const opaqueRegistry = new Map<string, OpaqueDecl>();
const planRegistry = new Map<string, RecomputePlan>();

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
  // A broken recompute declaration (unknown producer, cycle) fails here, not at backward time.
  const plan = decl.recompute === undefined ? undefined : buildRecomputePlan(decl.key, decl.saved, decl.recompute);
  opaqueRegistry.set(decl.key, decl as unknown as OpaqueDecl);
  if (plan !== undefined) planRegistry.set(decl.key, plan);
  return decl;
}

/** The recompute plan registered with a block, or undefined when it declares none. */
export function recomputePlanOf(key: string): RecomputePlan | undefined {
  return planRegistry.get(key);
}

export function opaqueKeys(): string[] {
  return [...opaqueRegistry.keys()];
}

let active: Tape | null = null;

export function activeTape(): Tape | null {
  return active;
}

/**
 * Runs fn with a fresh tape active; the tape is inactive again afterwards, whatever happens.
 * `policy` selects what opaque blocks with a recompute plan keep (default: everything).
 */
export function withTape<R>(fn: (tape: Tape) => R, policy: SavePolicy = STORE_ALL): R {
  if (active !== null) throw new Error("a tape is already active: tapes do not nest");
  if (policy.kind === "checkpoint" && !(Number.isInteger(policy.every) && policy.every >= 1)) {
    throw new Error(`checkpoint policy: every = ${policy.every}, expected an integer >= 1`);
  }
  const tape = new Tape(policy);
  active = tape;
  try {
    return fn(tape);
  } finally {
    active = null;
  }
}

let nextTapeId = 1;

export class Tape {
  /** Tensors on this tape carry this id (a field check is cheaper than a set lookup per op). */
  private readonly id = nextTapeId++;
  private readonly entries: TapeEntry[] = [];
  private heldBytes = 0;
  private readonly heldShared = new Set<Data>();
  private readonly grads = new Map<Tensor, Data>();
  private readonly owned = new Set<Data>();
  private used = false;

  constructor(readonly policy: SavePolicy = STORE_ALL) {}

  /**
   * Whether a block registered under `key` is recorded with its recompute plan: only when the
   * tape's policy asks for it and the block declares one. The recorder then passes the plan's
   * stored tensors instead of every saved tensor.
   */
  recomputes(key: string): boolean {
    return this.policy.kind !== "store-all" && planRegistry.has(key);
  }

  /** Registers a parameter or input: the tape keeps a snapshot, later writes to `t` do not reach it. */
  param(t: Tensor): Tensor {
    const snap = clone(t);
    snap.tapeId = this.id;
    this.heldBytes += snap.data.byteLength;
    return snap;
  }

  /** Same as param: inputs are snapshotted too. */
  input(t: Tensor): Tensor {
    return this.param(t);
  }

  tracks(t: Tensor): boolean {
    return t.tapeId === this.id;
  }

  anyTracked(ts: readonly Tensor[]): boolean {
    for (let i = 0; i < ts.length; i++) if (ts[i]!.tapeId === this.id) return true;
    return false;
  }

  get length(): number {
    return this.entries.length;
  }

  /**
   * Records a single-output op whose VJP is `vjp(inputs, out, dOut, attrs)`. This is the hot
   * path of every tape op, so it stores a plain record instead of building a closure.
   */
  recordOp<A>(op: string, vjp: OpVjp<A>, inputs: readonly Tensor[], out: Tensor, attrs: A): void {
    if (this.used) throw new Error("tape already ran backward: it is single-use");
    this.entries.push(new OpEntry(op, vjp as OpVjp<unknown>, inputs, out, attrs));
    if (out.tapeId !== this.id) this.heldBytes += out.data.byteLength;
    out.tapeId = this.id;
  }

  record(entry: TapeEntry): void {
    if (this.used) throw new Error("tape already ran backward: it is single-use");
    this.entries.push(entry);
    for (let i = 0; i < entry.outputs.length; i++) {
      const o = entry.outputs[i]!;
      // Op outputs are fresh buffers; a tensor already on the tape is not counted twice.
      if (o.tapeId !== this.id) this.heldBytes += o.data.byteLength;
      o.tapeId = this.id;
    }
  }

  /** Records an opaque block registered under `key`; its saved tensors must match the declaration exactly. */
  recordOpaque(key: string, inputs: Named<string>, outputs: Named<string>, saved: Named<string>, attrs?: unknown): void {
    const decl = opaqueRegistry.get(key);
    if (decl === undefined) throw new Error(`opaque block '${key}' is not registered`);
    checkNames(`opaque '${key}' inputs`, decl.inputs, inputs);
    checkNames(`opaque '${key}' outputs`, decl.outputs, outputs);
    const plan = this.recomputes(key) ? planRegistry.get(key)! : undefined;
    checkNames(`opaque '${key}' saved${plan !== undefined ? ` (recompute: stored)` : ""}`, plan?.stored ?? decl.saved, saved);
    const policy = this.policy;
    // Saved tensors may alias inputs or each other: count each buffer once.
    for (const s of Object.values(saved)) {
      if (s.tapeId !== this.id && !this.heldShared.has(s.data)) {
        this.heldShared.add(s.data);
        this.heldBytes += s.data.byteLength;
      }
    }
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
        // Under a recompute policy the plan rebuilds what the forward did not keep, then the
        // same registered backward runs on it.
        const full = plan === undefined ? saved : runRecomputePlan(plan, saved, attrs, policy);
        const dIn = decl.backward(full, named, attrs);
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
    if (out.tapeId !== this.id) throw new Error("backward: the output is not on this tape");
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
        if (d === null || d === undefined || inp.tapeId !== this.id) return;
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
    return this.heldBytes;
  }

}

function checkNames(what: string, declared: readonly string[], given: Named<string>): void {
  const got = Object.keys(given).sort();
  const want = [...declared].sort();
  if (got.length !== want.length || got.some((n, i) => n !== want[i])) {
    throw new Error(`${what}: declared {${want.join(", ")}}, given {${got.join(", ")}}`);
  }
}
