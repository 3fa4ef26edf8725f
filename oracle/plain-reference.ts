/**
 * The plain-precision reference (docs/spec/precision.md#plain): our reference pair run with a
 * kernel's declared precision emulated — every tensor crossing the ABI rounded to the storage
 * dtype, the state to the state dtype, and every sum of the numeric kernels accumulated in the
 * accumulate dtype, in the reference's own order. Its distance from ref64 is the rounding a
 * correct kernel of that precision may show; the flash-attention bound is twice that plus a floor.
 *
 * ref64 is run on the SAME rounded inputs (cast to f64), so rounding the inputs is never counted
 * as the kernel's error.
 */
import { roundTo, withAccumulate, type Precision, type StorageDType, type SumRounding } from "../src/precision.ts";
import { INNER_INPUT_NAMES, type InnerInputs, type RuleConfig, type RuleDecl } from "../src/rules/types.ts";
import { Tensor, type DType } from "../src/tensor.ts";
import type { PairCase, SeqTensors } from "./kernel-case.ts";
import { referenceRun } from "./kernel-reference.ts";
import { hasFastPair } from "./matrix-fast.ts";

/** One run of a pair as f64 values: y, the final state (active pairs), every gradient the pair returns. */
type PairRun = SeqTensors<Float64Array> & { y: Float64Array };

/**
 * A rounding of values: to a storage dtype, or none (`null`). Rounding to f32 is the conversion a
 * Float32Array store makes, and the identity on values read from one, so those copies are one
 * typed-array set (the same values as the element loop, without a call per element).
 */
type Rounding = StorageDType | null;

/** `a` rounded by `r` into `out` (as long as `a`). */
function roundInto(out: Float64Array | Float32Array, a: ArrayLike<number>, r: Rounding): void {
  if (r === null || (r === "f32" && (out instanceof Float32Array || a instanceof Float32Array))) out.set(a);
  else for (let i = 0; i < out.length; i++) out[i] = roundTo(r, a[i]!);
}

function mapTensor(t: Tensor, dtype: DType, r: Rounding): Tensor {
  const out = new Tensor(dtype, [...t.shape]);
  roundInto(out.data, t.data, r);
  return out;
}

function mapCase(c: PairCase, dtype: DType, storage: Rounding, state: Rounding): PairCase {
  const inputs: Record<string, Tensor> = {};
  for (const n of INNER_INPUT_NAMES) {
    const t = c.inputs[n];
    if (t !== undefined) inputs[n] = mapTensor(t, dtype, storage);
  }
  const st: Record<string, Tensor> = {};
  for (const [n, t] of Object.entries(c.state)) st[n] = mapTensor(t, dtype, state);
  let dFinal: Record<string, Tensor> | undefined;
  if (c.dFinal !== undefined) {
    dFinal = {};
    for (const [n, t] of Object.entries(c.dFinal)) dFinal[n] = mapTensor(t, dtype, state);
  }
  return { inputs: inputs as unknown as InnerInputs, state: st, dy: mapTensor(c.dy, dtype, storage), ...(dFinal ? { dFinal } : {}) };
}

/** The case as a plain run reads it: every ABI tensor rounded to the precision's storage dtype and the state to its state dtype, in f32 (exact: every storage dtype is at most f32 wide). */
export function plainCase(c: PairCase, p: Pick<Precision, "storage" | "state">): PairCase {
  return mapCase(c, "f32", p.storage, p.state);
}

/** The case with every ABI tensor rounded to the precision's storage dtype and the state to its state dtype (as f64). */
export function roundCase(c: PairCase, p: Precision): PairCase {
  return mapCase(c, "f64", p.storage, p.state);
}

function toF64(a: ArrayLike<number> | undefined, r: Rounding): Float64Array {
  const out = new Float64Array(a?.length ?? 0);
  if (a !== undefined) roundInto(out, a, r);
  return out;
}

/** The reference run (oracle/kernel-reference.ts, the judge's pair) with its outputs as f64 values, rounded to `storage` and `state`. */
function run(decl: RuleDecl, frozen: boolean, c: PairCase, cfg: RuleConfig, storage: Rounding, state: Rounding): PairRun {
  const r = referenceRun(decl, frozen, c, cfg, "both");
  const each = (rec: Record<string, ArrayLike<number>>, round: Rounding) =>
    Object.fromEntries(Object.entries(rec).map(([n, a]) => [n, toF64(a, round)]));
  return { y: toF64(r.y, storage), state: each(r.state, state), grads: each(r.grads, storage), dState0: each(r.dState0, state) };
}

/**
 * The plain reference: f32 storage for every intermediate (every storage dtype here is at most
 * f32 wide, so its values are exact in f32), sums in the accumulate dtype, outputs rounded to the
 * storage dtype and the final state to the state dtype.
 */
export function runPlain(decl: RuleDecl, frozen: boolean, c: PairCase, cfg: RuleConfig, p: Precision, order: SumRounding = "natural"): PairRun {
  const inF32 = mapCase(c, "f32", p.storage, p.state);
  return withAccumulate(p.accumulate, () => run(decl, frozen, inF32, cfg, p.storage, p.state), order);
}


/** Which runs the plain reference of an f32-summing kernel makes besides the natural order. */
export interface PlainRuns {
  /** A run with every sum in reverse order. */
  readonly reversed: boolean;
  /** Runs with random rounding (seeds 1, 2, ...). */
  readonly random: number;
}

/**
 * The roundings a plain reference is run with for a kernel of accumulate dtype `acc`
 * (docs/spec/precision.md#orders): f64 sums are order-insensitive at the bound's scale, so one run.
 * An f32 sum of cancelling terms lands on different roundings in different orders, and one run is
 * one sample of them: f32 is run in the natural order and, as `runs` says, reversed and with random
 * rounding (seeds 1, 2, ...: the same runs every time).
 */
export function plainOrders(acc: Precision["accumulate"], runs: PlainRuns = PLAIN_RUNS): SumRounding[] {
  if (acc === "f64") return ["natural"];
  return ["natural", ...(runs.reversed ? ["reversed" as const] : []), ...Array.from({ length: runs.random }, (_, i) => ({ random: i + 1 }))];
}

/** Random-rounding runs of the plain reference of an f32-summing kernel (measured choice: docs/spec/precision.md#orders). */
export const RANDOM_RUNS = 8;
/** The runs of a rule's plain reference: natural, reversed and RANDOM_RUNS random (docs/spec/precision.md#orders). */
export const PLAIN_RUNS: PlainRuns = { reversed: true, random: RANDOM_RUNS };
/**
 * The same for the rules the judge runs a fast pair for (Delta, Gated Delta: oracle/matrix-fast.ts),
 * whose sums are plain dot products and outer-product updates: the natural order alone, calibrated
 * separately (docs/spec/precision.md#orders-matrix).
 */
export const PLAIN_RUNS_MATRIX: PlainRuns = { reversed: false, random: 0 };

/** The runs of a rule's plain reference. */
export function plainRuns(decl: RuleDecl): PlainRuns {
  return hasFastPair(decl) ? PLAIN_RUNS_MATRIX : PLAIN_RUNS;
}

/**
 * The plain reference's yardstick: `run(rounding)` once per rounding of plainOrders(acc), and per
 * tensor and element the value farther from ref64, so max|yardstick − ref64| is the larger
 * error any of the runs made. Names ref64 lacks are taken from the first run.
 */
export function plainYardstick<K extends string>(acc: Precision["accumulate"], ref64: Readonly<Record<K, ArrayLike<number>>>,
  run: (rounding: SumRounding) => Readonly<Record<K, ArrayLike<number>>>, runs: PlainRuns = PLAIN_RUNS): Record<K, ArrayLike<number>> {
  const [first, ...rest] = plainOrders(acc, runs).map((o) => withAccumulate(acc, () => run(o), o));
  const out = { ...first! } as Record<K, ArrayLike<number>>;
  if (rest.length === 0) return out;
  for (const name of Object.keys(out) as K[]) out[name] = farthest(out[name], rest.map((r) => r[name]), ref64[name]);
  return out;
}

/** plainYardstick on a kernel case's typed record (every tensor of every part). */
export function plainYardstickSeq(acc: Precision["accumulate"], ref64: SeqTensors, run: (rounding: SumRounding) => SeqTensors,
  runs: PlainRuns = PLAIN_RUNS): SeqTensors {
  return plainYardstickOf(ref64, plainOrders(acc, runs).map((o) => withAccumulate(acc, () => run(o), o)));
}

/**
 * plainYardstickSeq's combining step, on data: the runs made in plainOrders' order (each under
 * enterAccumulate with its rounding, by a caller that runs the reference itself), per tensor and
 * element the value farther from ref64; the first run as it is where it is the only one.
 */
export function plainYardstickOf(ref64: SeqTensors, runs: readonly SeqTensors[]): SeqTensors {
  const [first, ...rest] = runs;
  if (first === undefined) throw new Error("plainYardstickOf: no run");
  const part = (p: "state" | "grads" | "dState0"): Record<string, ArrayLike<number>> => {
    const out = { ...first[p] };
    if (rest.length > 0) for (const name of Object.keys(out)) out[name] = farthest(out[name]!, rest.map((r) => r[p][name]), ref64[p][name]);
    return out;
  };
  const y = first.y === undefined || rest.length === 0 ? first.y : farthest(first.y, rest.map((r) => r.y), ref64.y);
  return { ...(y !== undefined ? { y } : {}), state: part("state"), grads: part("grads"), dState0: part("dState0") };
}

/** Per element, the value of `first` or of the `others` farthest from ref64 (`first` itself where ref64 lacks the tensor). */
function farthest(first: ArrayLike<number>, others: readonly (ArrayLike<number> | undefined)[], r64: ArrayLike<number> | undefined): ArrayLike<number> {
  if (r64 === undefined) return first;
  const far = Float64Array.from(first);
  for (const o of others) {
    if (o === undefined) continue;
    for (let i = 0; i < far.length; i++) if (Math.abs(o[i]! - r64[i]!) > Math.abs(far[i]! - r64[i]!)) far[i] = o[i]!;
  }
  return far;
}

