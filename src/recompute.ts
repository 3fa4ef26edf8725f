/**
 * Recompute plans (docs/spec/tape.md#recompute, docs/spec/chunk-forms.md#recompute).
 *
 * An opaque block saves named tensors for its backward. A recompute declaration says which of
 * them are kept (`stored`) and which are rebuilt at backward time by a producer: a forward piece
 * that reads named tensors and makes named tensors. The plan is assembled once, when the block is
 * registered: every saved name must be stored or made by exactly one producer, every name a
 * producer reads must be stored or made, and the producers must form no cycle. A broken
 * declaration is therefore an error at registration, never at backward time.
 */
import type { Tensor } from "./tensor.ts";

type Named = Readonly<Record<string, Tensor>>;

/**
 * What the tape keeps between forward and backward. `recompute` keeps the block's inputs and the
 * state at the start of the sequence; `checkpoint` keeps, in addition, the state every `every`
 * tokens, so each stretch can be rebuilt from its own start.
 */
export type SavePolicy =
  | { readonly kind: "store-all" }
  | { readonly kind: "recompute" }
  | { readonly kind: "checkpoint"; readonly every: number };

export const STORE_ALL: SavePolicy = { kind: "store-all" };

export function policyName(p: SavePolicy): string {
  return p.kind === "checkpoint" ? `checkpoint-${p.every}` : p.kind;
}

/** A forward piece that rebuilds saved tensors from other named tensors. */
export interface Producer {
  readonly name: string;
  readonly from: readonly string[];
  readonly makes: readonly string[];
  /** `attrs` is the block's recorder context; `policy` the one the tape ran under. */
  run(inputs: Named, attrs: unknown, policy: SavePolicy): Named;
}

export interface RecomputeDecl {
  /** Names kept under a recompute policy (block inputs, initial state, checkpoints). */
  readonly stored: readonly string[];
  readonly producers: readonly Producer[];
}

export interface RecomputePlan {
  readonly stored: readonly string[];
  /** Producers in an order where each runs after every producer it reads from. */
  readonly order: readonly Producer[];
}

/**
 * Builds the plan for a block whose backward reads `saved`. Throws, naming the block, on a name
 * nobody makes, a name made twice, a producer reading an unknown name, or a cycle.
 */
export function buildRecomputePlan(key: string, saved: readonly string[], decl: RecomputeDecl): RecomputePlan {
  const who = `recompute plan of '${key}'`;
  const maker = new Map<string, Producer>();
  for (const p of decl.producers) {
    for (const n of p.makes) {
      if (decl.stored.includes(n)) throw new Error(`${who}: '${n}' is both stored and made by producer '${p.name}'`);
      const other = maker.get(n);
      if (other !== undefined) throw new Error(`${who}: '${n}' is made by two producers, '${other.name}' and '${p.name}'`);
      maker.set(n, p);
    }
  }
  const known = (n: string) => decl.stored.includes(n) || maker.has(n);
  for (const p of decl.producers) {
    for (const n of p.from) {
      if (!known(n)) throw new Error(`${who}: producer '${p.name}' reads '${n}', which is neither stored nor made by any producer (unknown producer)`);
    }
  }
  for (const n of saved) {
    if (!known(n)) throw new Error(`${who}: saved tensor '${n}' is neither stored nor made by any producer (unknown producer)`);
  }
  // Depth-first topological sort; a producer met again while still open closes a cycle.
  const order: Producer[] = [];
  const state = new Map<Producer, "open" | "done">();
  const visit = (p: Producer, path: string[]): void => {
    const s = state.get(p);
    if (s === "done") return;
    if (s === "open") throw new Error(`${who}: producers form a cycle: ${[...path, p.name].join(" -> ")}`);
    state.set(p, "open");
    for (const n of p.from) {
      const q = maker.get(n);
      if (q !== undefined) visit(q, [...path, p.name]);
    }
    state.set(p, "done");
    order.push(p);
  };
  for (const p of decl.producers) visit(p, []);
  return { stored: [...decl.stored], order };
}

/** Runs the plan from the stored tensors and returns the stored and rebuilt tensors together. */
export function runRecomputePlan(plan: RecomputePlan, stored: Named, attrs: unknown, policy: SavePolicy): Record<string, Tensor> {
  const all: Record<string, Tensor> = { ...stored };
  for (const p of plan.order) {
    const inputs: Record<string, Tensor> = {};
    for (const n of p.from) inputs[n] = all[n]!;
    const made = p.run(inputs, attrs, policy);
    for (const n of p.makes) {
      const t = made[n];
      if (t === undefined) throw new Error(`producer '${p.name}' did not make '${n}'`);
      all[n] = t;
    }
  }
  return all;
}
