/**
 * The child's cases: a batch of up to three sequences of one rule variant (the base case of the
 * rule registry's generator plus sequences with their own seed, gates and state), each as f32
 * inputs for the kernel and the reference, and the same values in f64 for the f64 reference.
 */
import * as fc from "fast-check";
import type { RuleAbi } from "../../ffi/abi.ts";
import type { Arrays } from "../../ffi/lib.ts";
import type { Profile } from "../../harness/check.ts";
import { ALPHA_LEVELS, THETA_LEVELS, buildRuleCase, ruleCaseSpecArb, type RuleCaseSpec, type SizeLimits } from "../../cases/rule-case.ts";
import { frozenForwardSaved, ruleForwardSaved } from "../../src/rules/level.ts";
import type { InnerInputs, RuleConfig, RuleDecl, State } from "../../src/rules/types.ts";
import { Tensor, cast } from "../../src/tensor.ts";

interface SeqExtra {
  seed: number;
  alpha: keyof typeof ALPHA_LEVELS;
  theta: keyof typeof THETA_LEVELS;
  state: "init" | "random";
}

/** A batch: the base case plus up to two more sequences with their own seed, gates and state. */
export interface KSpec {
  base: RuleCaseSpec;
  B: number;
  extra: SeqExtra[];
}

export function sizesFor(profile: Profile): SizeLimits {
  return profile === "deep" ? { d: [1, 12], seq_len: [1, 8] } : { d: [1, 12], seq_len: [1, 6] };
}

export function batchArb(decl: RuleDecl, frozen: boolean, profile: Profile): fc.Arbitrary<KSpec> {
  let base = ruleCaseSpecArb(decl, sizesFor(profile));
  // deep adds sizes that are odd and not a multiple of 32, above one warp
  if (profile === "deep") base = fc.oneof({ weight: 4, arbitrary: base }, { weight: 1, arbitrary: ruleCaseSpecArb(decl, { d: [33, 40], seq_len: [1, 4] }) });
  const extra = fc.record({
    seed: fc.integer({ min: 1, max: 0x7fffffff }),
    alpha: fc.constantFrom<SeqExtra["alpha"]>("mid", "low", "high"),
    theta: fc.constantFrom<SeqExtra["theta"]>("small", "large"),
    state: fc.constantFrom<SeqExtra["state"]>("init", "random"),
  });
  return fc.record({ base, B: fc.integer({ min: 1, max: 3 }), extra: fc.array(extra, { minLength: 2, maxLength: 2 }) }).map((k) =>
    // a frozen read of a zero state reads zero: frozen variants read random states
    frozen ? { ...k, base: { ...k.base, state: "random" as const }, extra: k.extra.map((e) => ({ ...e, state: "random" as const })) } : k);
}

function specsOf(k: KSpec): RuleCaseSpec[] {
  const out = [k.base];
  for (let b = 1; b < k.B; b++) out.push({ ...k.base, ...k.extra[b - 1]! });
  return out;
}

/** f32 once, and the same values in f64: kernel, ref32 and ref64 all see identical inputs. */
function pairOf(t: Tensor): { t32: Tensor; t64: Tensor } {
  const t32 = cast(t, "f32");
  return { t32, t64: cast(t32, "f64") };
}

/** One sequence of a batch: the inner inputs (or q, frozen), the state and dy, in f32 and f64. */
export interface Seq {
  cfg: RuleConfig;
  in32: InnerInputs;
  in64: InnerInputs;
  st32: State;
  st64: State;
  dy32: Tensor;
  dy64: Tensor;
}

const INNER_NAMES = ["k", "v", "q", "x", "alpha", "theta", "eta", "omega"] as const;

function sequence(decl: RuleDecl, spec: RuleCaseSpec, frozen: boolean): Seq {
  const c = buildRuleCase(decl, spec, "f64");
  const raw: Record<string, Tensor> = {};
  if (frozen) {
    raw.q = frozenForwardSaved(decl, c.X, c.params, c.state, c.cfg).saved.q!;
  } else {
    const saved = ruleForwardSaved(decl, c.X, c.params, c.state, c.cfg).saved;
    for (const n of INNER_NAMES) {
      const t = n === "x" ? saved.X : saved[n];
      if (t !== undefined) raw[n] = t;
    }
  }
  const in32: Record<string, Tensor> = {}, in64: Record<string, Tensor> = {};
  for (const [n, t] of Object.entries(raw)) ({ t32: in32[n]!, t64: in64[n]! } = pairOf(t));
  const st32: Record<string, Tensor> = {}, st64: Record<string, Tensor> = {};
  for (const [n, t] of Object.entries(c.state)) ({ t32: st32[n]!, t64: st64[n]! } = pairOf(t));
  const dy = pairOf(c.dy);
  return { cfg: c.cfg, in32: in32 as unknown as InnerInputs, in64: in64 as unknown as InnerInputs, st32, st64, dy32: dy.t32, dy64: dy.t64 };
}

/** The batch's sequences (all of one config: the extras change seeds, gates and state only). */
export function sequencesOf(decl: RuleDecl, k: KSpec, frozen: boolean): { seqs: Seq[]; cfg: RuleConfig; B: number } {
  const seqs = specsOf(k).map((s) => sequence(decl, s, frozen));
  return { seqs, cfg: seqs[0]!.cfg, B: seqs.length };
}

export function concat(parts: ArrayLike<number>[]): Float32Array {
  const n = parts.reduce((s, p) => s + p.length, 0);
  const out = new Float32Array(n);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

export function batchInputs(a: RuleAbi, seqs: Seq[]): Arrays {
  const out: Arrays = {};
  for (const n of a.inputs) out[n] = concat(seqs.map((s) => s.in32[n]!.data));
  return out;
}

export function batchState(names: readonly string[], seqs: Seq[]): Arrays {
  const out: Arrays = {};
  for (const n of names) out[n] = concat(seqs.map((s) => s.st32[n]!.data));
  return out;
}

export const batchQ = (seqs: Seq[]): Float32Array => concat(seqs.map((s) => s.in32.q.data));
export const batchDy = (seqs: Seq[]): Float32Array => concat(seqs.map((s) => s.dy32.data));

/** Sequence b of a batched output. */
export function slice(a: Float32Array, B: number, b: number): Float32Array {
  const n = a.length / B;
  return a.subarray(b * n, (b + 1) * n);
}

