/**
 * The recompute declaration of every rule block, derived from the rule declaration once
 * (docs/spec/chunk-forms.md#recompute): nothing is written per rule.
 *
 *   stored      X, the level parameters, and the rule state at every checkpoint (`ckpt.<name>`,
 *               [n_ckpt, ...state shape]: the start state alone under `recompute`, the state
 *               every C tokens under `checkpoint-C`)
 *   "level"     X, parameters → k, v, q (and k_raw, q_raw, gates, gate pre-activations, omega)
 *   "inner"     k, v, q, X, gates, omega, checkpoints → the inner pair's saved tensors, by running
 *               the inner forward again from each checkpoint over its stretch of tokens
 *
 * The producers call the same forward code the forward ran, so what they rebuild is bitwise what
 * store-all kept, and the backward that reads it is unchanged.
 */
import type { Producer, RecomputeDecl, SavePolicy } from "../recompute.ts";
import { Tensor, alloc } from "../tensor.ts";
import type { InnerInputs, InnerPair, RuleConfig, RuleDecl, State } from "./types.ts";
import { stateNames } from "./state-grad.ts";

/** Per-token inner inputs that a stretch of tokens slices ([s, d] or [s]). */
const TOKEN_INPUTS = ["k", "v", "q", "x", "p", "a", "b", "alpha", "theta", "eta", "omega"] as const;

export function checkpointName(state: string): string {
  return `ckpt.${state}`;
}

/**
 * Whether a rule's forward over a sequence equals its forward over two halves, the second started
 * from the first's final state. Not for rules that derive something from the state at the call's
 * start (Moneta's accumulators, YAAD's boundary snapshot: `derivedState`), nor for stateless SWA,
 * whose window reaches across any cut. Those keep one checkpoint, the start, under every policy.
 */
export function restartable(decl: RuleDecl): boolean {
  return decl.derivedState === undefined && stateNames(decl).length > 0;
}

/** Token boundaries of the stretches a policy cuts a sequence of s tokens into. */
export function stretchStarts(decl: RuleDecl, s: number, policy: SavePolicy): number[] {
  const every = policy.kind === "checkpoint" && restartable(decl) ? policy.every : s;
  const starts: number[] = [];
  for (let c = 0; c < Math.max(s, 1); c += Math.max(every, 1)) starts.push(c);
  return starts;
}

function sliceRows(t: Tensor, from: number, len: number): Tensor {
  const row = t.size / t.shape[0]!;
  return new Tensor(t.dtype, [len, ...t.shape.slice(1)], t.data.slice(from * row, (from + len) * row));
}

function sliceInputs(inp: InnerInputs, from: number, len: number): InnerInputs {
  const out: Record<string, Tensor> = {};
  for (const n of TOKEN_INPUTS) {
    const t = inp[n];
    if (t !== undefined) out[n] = sliceRows(t, from, len);
  }
  return out as unknown as InnerInputs;
}

export interface StretchRun {
  y: Tensor;
  finalState: State;
  saved: Record<string, Tensor>;
  /** The state at each stretch start. */
  checkpoints: State[];
}

/**
 * Runs the inner forward stretch by stretch (each from the previous stretch's final state, or
 * from `starts`' own checkpoint states when given) and joins y and the saved tensors along time.
 * A saved tensor with one row per token is concatenated; one with a row per boundary (s + 1
 * rows) shares each stretch's first row with the previous stretch's last.
 */
export function runStretches(inner: InnerPair<string>, inp: InnerInputs, state: State, cfg: RuleConfig,
  starts: readonly number[], given?: readonly State[]): StretchRun {
  const s = cfg.seq_len;
  const parts: { len: number; y: Tensor; saved: Record<string, Tensor> }[] = [];
  const checkpoints: State[] = [];
  let st = state;
  for (let i = 0; i < starts.length; i++) {
    const from = starts[i]!, len = (starts[i + 1] ?? s) - from;
    if (given !== undefined) st = given[i]!;
    checkpoints.push(st);
    const r = inner.forward(sliceInputs(inp, from, len), st, { ...cfg, seq_len: len });
    parts.push({ len, y: r.y, saved: r.saved });
    st = r.finalState;
  }
  if (parts.length === 1) return { y: parts[0]!.y, finalState: st, saved: parts[0]!.saved, checkpoints };
  const saved: Record<string, Tensor> = {};
  for (const name of inner.saved) {
    const first = parts[0]!.saved[name]!;
    const boundary = first.shape[0] === parts[0]!.len + 1;
    const rowShape = first.shape.slice(1), row = first.size / first.shape[0]!;
    const rows = boundary ? s + 1 : s;
    const data = alloc(first.dtype, rows * row);
    let at = 0;
    parts.forEach((p, i) => {
      const t = p.saved[name]!;
      const want = boundary ? p.len + 1 : p.len;
      if (t.shape[0] !== want) throw new Error(`saved tensor '${name}': ${t.shape[0]} rows for a stretch of ${p.len} tokens, expected ${want}`);
      const skip = boundary && i > 0 ? 1 : 0;
      data.set(t.data.subarray(skip * row), at);
      at += (want - skip) * row;
    });
    saved[name] = new Tensor(first.dtype, [rows, ...rowShape], data);
  }
  const y = alloc(parts[0]!.y.dtype, s * cfg.d);
  let at = 0;
  for (const p of parts) {
    y.set(p.y.data, at);
    at += p.y.size;
  }
  return { y: new Tensor(parts[0]!.y.dtype, [s, cfg.d], y), finalState: st, saved, checkpoints };
}

/** Checkpoint states packed as the stored tensors `ckpt.<name>`, [n_ckpt, ...shape]. */
export function packCheckpoints(decl: RuleDecl, checkpoints: readonly State[]): Record<string, Tensor> {
  const out: Record<string, Tensor> = {};
  for (const n of stateNames(decl)) {
    const first = checkpoints[0]![n]!;
    const data = alloc(first.dtype, checkpoints.length * first.size);
    checkpoints.forEach((c, i) => data.set(c[n]!.data, i * first.size));
    out[checkpointName(n)] = new Tensor(first.dtype, [checkpoints.length, ...first.shape], data);
  }
  return out;
}

export function unpackCheckpoints(decl: RuleDecl, stored: Readonly<Record<string, Tensor>>): State[] {
  const names = stateNames(decl);
  if (names.length === 0) return [{}];
  const n = stored[checkpointName(names[0]!)]!.shape[0]!;
  const out: State[] = [];
  for (let i = 0; i < n; i++) {
    const st: Record<string, Tensor> = {};
    for (const name of names) {
      const t = stored[checkpointName(name)]!;
      const size = t.size / n;
      st[name] = new Tensor(t.dtype, t.shape.slice(1), t.data.slice(i * size, (i + 1) * size));
    }
    out.push(st);
  }
  return out;
}

/** What the recorder of a rule block hands a producer (the block's attrs). */
export interface RecomputeAttrs {
  readonly decl: RuleDecl;
  readonly cfg: RuleConfig;
  readonly inner: InnerPair<string>;
}

/** The level's part of the work, passed in so this module does not import level.ts. */
export interface LevelPieces {
  readonly paramNames: readonly string[];
  readonly levelSaved: readonly string[];
  /** Recomputes the level's saved tensors (k, v, q, gates, ...) from X and the parameters. */
  levelForward(X: Tensor, params: Readonly<Record<string, Tensor>>): { inputs: InnerInputs; saved: Record<string, Tensor> };
  innerInputsOf(saved: Readonly<Record<string, Tensor>>): InnerInputs;
}

export function ruleRecomputeDecl(decl: RuleDecl, lv: LevelPieces): RecomputeDecl {
  const ckpts = stateNames(decl).map(checkpointName);
  const stored = ["X", ...lv.paramNames, ...ckpts];
  const levelMade = lv.levelSaved.filter((n) => !stored.includes(n));
  const innerFrom = ["X", "k", "v", "q", ...(decl.auxInputs ?? []), ...decl.gates, ...(decl.omega ? ["omega"] : []), ...ckpts];
  const level: Producer = {
    name: "level", from: ["X", ...lv.paramNames], makes: levelMade,
    run: (t) => {
      const r = lv.levelForward(t.X!, t);
      const out: Record<string, Tensor> = {};
      for (const n of levelMade) out[n] = r.saved[n]!;
      return out;
    },
  };
  const inner: Producer = {
    name: "inner", from: innerFrom, makes: decl.inner.saved,
    run: (t, attrs, policy) => {
      const a = attrs as RecomputeAttrs;
      const given = unpackCheckpoints(decl, t);
      const starts = stretchStarts(decl, a.cfg.seq_len, policy);
      if (starts.length !== given.length) throw new Error(`rule '${decl.key}': ${given.length} checkpoints stored, the policy cuts ${starts.length} stretches`);
      return runStretches(a.inner, lv.innerInputsOf(t), given[0]!, a.cfg, starts, given).saved;
    },
  };
  return { stored, producers: [level, inner] };
}
