/**
 * The precision table (docs/spec/precision.md#table): every tolerance constant of the suite — the
 * dtypes' unit roundoffs, the kernel judge's floors and multipliers, the bias test's, the gradient
 * and cross-implementation tolerances of the tape checks, C6's and C9's — in one place, each with
 * where it applies and why it has its value. The modules that judge import their constants from
 * here; precision.md's table is rendered from this one (tests/precision-table.test.ts fails when the
 * two disagree).
 */
import { unitRoundoff, type AccumulateDType, type StorageDType } from "../src/precision.ts";

/** One constant: its value (a number, or one per dtype), the module that applies it, what it bounds, and why. */
export interface TableEntry<V> {
  readonly value: V;
  /** The module that applies it. */
  readonly module: string;
  /** What it is, in a phrase. */
  readonly what: string;
  /** Why it has this value: the measurement or argument behind it. */
  readonly reason: string;
}

function entry<V>(value: V, module: string, what: string, reason: string): TableEntry<V> {
  return { value, module, what, reason };
}

type PerStorage = Readonly<Record<StorageDType, number>>;
type PerAccumulate = Readonly<Record<AccumulateDType, number>>;

/**
 * TF32 (docs/spec/precision.md#tf32). A chunked kernel builds y and dα through several TF32 products
 * the recurrent reference does not have, so the TF32 yardstick (the reference with its products'
 * operands rounded to TF32) undershoots the kernel by 30 to 100 times, and the floors carry the
 * bound; a TF32 product's error follows its operands, so the floors follow the tensor's group.
 */
const TF32_FLOOR = 5e-3;
const TF32_FLOOR_REASON =
  "tf32 (f32 sums of products whose operands are cut to TF32, toward zero, as tensor cores take f32 operands; relative to the group, see the tf32 group floor): 1.5 times the largest error of fla's f32 chunked kernels on an H100 (3.3e-3 of the group's largest value); a correct truncating chunked Gated DeltaNet passes at seeds 1-50 of the quick profile (reports/measurements/tf32.md)";
const TF32_BIAS_FLOOR = 3e-3;
const TF32_BIAS_REASON =
  "truncation to TF32 shrinks a chunked kernel's tensors by 7e-4 per product level: correct kernels showed slopes up to 1.84e-3 (false alarms at 1.6e-3); at 3e-3 a correct one passes at seeds 1-50 and 1 % scales fail at every seed (reports/measurements/tf32.md)";

/** Unit roundoff (half the machine epsilon) of every dtype a kernel may declare; src/precision.ts rounds to them. */
export const UNIT_ROUNDOFF = entry<Readonly<Record<StorageDType | AccumulateDType, number>>>(
  { f64: unitRoundoff("f64"), f32: unitRoundoff("f32"), tf32: unitRoundoff("tf32"), bf16: unitRoundoff("bf16"), f16: unitRoundoff("f16") },
  "src/precision.ts",
  "unit roundoff u = 2^-p of a format with p significand bits (the implicit one included); for tf32, whose operands are cut, 2^-(p-1)",
  "a property of the formats: f64 p = 53, f32 p = 24, bf16 p = 8, f16 p = 11, round to nearest, ties to even; tf32 p = 11 (the operands of a tensor core's f32 products) cut toward zero: 2^-10, one unit in the last place",
);

/** The kernel judge (docs/spec/precision.md#flash, #floors, #ill-conditioned). */
export const KERNEL = {
  boundFactor: entry(2, "oracle/compare.ts, oracle/sequence-judge.ts",
    "the flash-attention bound: max|kernel − ref64| <= boundFactor · max|plain − ref64| + floor",
    "a correct kernel at a precision rounds about as much as the plain reference at that precision, in another order; twice its error covers the order (measured: #orders)"),
  floorRel: entry<PerAccumulate>({ f64: 1e-6, f32: 1e-4, tf32: TF32_FLOOR }, "oracle/kernel-judge.ts, oracle/sequence-judge.ts",
    "the bound's floor, relative to max|ref64| of the tensor and sequence, per accumulate dtype",
    "f64 sums: on tiny cases the plain reference can be exact while a kernel summing in another order is a few f32 roundings off; 1e-6 is ~16 roundings of the largest value. " +
      "f32 sums: the plain f32 reference keeps its scalar intermediates in f64, and a correct pure-f32 kernel (ffi/build.ts cpu-f32) was measured up to 2e-5 of max|ref64| (Moneta's y, Trellis' dq). " +
      TF32_FLOOR_REASON),
  groupFloor: entry(1e-3, "oracle/kernel-judge.ts, oracle/sequence-judge.ts",
    "a tensor's floor is at least this fraction of the floor of the largest tensor of its group (outputs, gradients) in the case",
    "a tensor zero by the math (a gradient that cancels) would otherwise compare its rounding residue to a floor of ~1e-22"),
  groupFloorTF32: entry(1, "oracle/kernel-judge.ts, oracle/sequence-judge.ts",
    "the same fraction for a kernel declaring tf32: its floor is relative to the largest tensor of the group",
    "a TF32 product's error scales with its operands, not its result: where a chunked kernel's y or dα cancels to a small value, its error follows the state and the other gradients (docs/spec/precision.md#tf32)"),
  exercised: entry(1e-6, "oracle/kernel-judge.ts",
    "a compared tensor whose |ref64| never exceeds this in any case of a check was never exercised (vacuous)",
    "below it every value is rounding residue of an exact zero; a check on it could not fail"),
  illConditioned: entry<PerStorage>({ f32: 1e-2, bf16: 5e-2, f16: 1e-2 }, "oracle/kernel-judge.ts",
    "a tensor whose plain reference is farther from ref64 than this fraction of its largest value is not judged in that case (listed as ill-conditioned)",
    "almost five times the largest relative plain error of a judged tensor in the default run (2.1e-3: MEMORA's dα, Trellis' dS_K_0); for bf16 well past its storage rounding; " +
      "above it two correct computations differ by more than the bound's factor of two (Moneta's L_q normalisation: plain 18 %, correct kernel 47 %)"),
} as const;

/** The bias test (docs/spec/precision.md#bias-calibration). */
export const BIAS = {
  k: entry(6, "oracle/bias.ts",
    "significance multiple: a slope counts when |slope| > k · σ",
    "over 1000 generated cases per rule variant the correct kernels' |slope|/σ stayed below it (docs/spec/precision.md#bias-calibration)"),
  plainFactor: entry(2, "oracle/bias.ts, oracle/sequence-judge.ts",
    "the plain-reference term of the threshold: plainFactor · ‖plain − ref64‖ / ‖ref64‖",
    "the same factor of two as the bound: a correct kernel's rounding may be twice the plain reference's"),
  floor: entry<PerStorage>({ f32: 1e-3, bf16: 5e-3, f16: 1e-3 }, "oracle/bias.ts, oracle/sequence-judge.ts",
    "per storage dtype, the smallest slope that counts as a bias",
    "correct kernels (the plain reference summed in reverse) showed |slope| up to 2.5e-4 in f32, 3.73e-3 in bf16, 4.6e-4 in f16 over 1000 cases per rule variant; " +
      "the floors sit above those, and a planted 1 % scale minus the largest correct slope stays above them"),
  floorTF32: entry(TF32_BIAS_FLOOR, "oracle/bias.ts, oracle/sequence-judge.ts",
    "the bias floor of a kernel declaring tf32 (f32 storage, TF32 products), in place of the storage dtype's",
    TF32_BIAS_REASON),
  minElementsTF32: entry(32, "oracle/bias.ts",
    "for a kernel declaring tf32, a tensor of fewer elements in a case is not bias-tested",
    "a few TF32 roundings (2^-11 of an operand each) are a systematic scale over few elements: correct slopes of 5.3e-3 (dα, 2 elements), 8.5e-4 (dv, 4), 6.6e-4 (y, 9); the first fixed case has 34 elements of dα"),
} as const;

/** Detection power (docs/spec/conformance.md#signatures, precision.md#power). */
export const POWER = {
  scaleEps: entry([1e-3, 1e-2, 1e-1] as const, "oracle/kernel-power.ts",
    "the scale errors (1 + ε) planted into each tensor to measure the bound's power",
    "a decade apart from 0.1 % (the smallest a bf16 kernel's rounding cannot hide) to 10 %"),
  material: entry(1e-2, "oracle/kernel-power.ts",
    "a mutation is material when it moves its tensor by more than this fraction of its largest reference value",
    "below 1 % of a tensor's scale a change is within a bf16 kernel's own rounding; 1 % is the scale error --min-power is built around"),
} as const;

/** The tape checks' tolerances (docs/spec/README.md, tolerances.md). */
export const TAPE = {
  handWritten: entry({ rtol: 1e-12, atol: 1e-12 }, "oracle/compare.ts (TOL_ULP)",
    "tape gradient vs the hand-written one (and other same-math f64 comparisons), max form",
    "two f64 computations of the same math in different orders differ by a few thousand ulp at most; 1e-12 leaves margin and no modelling error fits under it"),
  finiteDifferences: entry({ rtol: 1e-5, atol: 1e-8 }, "oracle/compare.ts (TOL_FD), conformance/c9/rule-cases.ts",
    "tape gradient vs Richardson-extrapolated central finite differences",
    "the extrapolated difference quotient at h = 1e-5 is accurate to ~1e-8 of the scale in f64 (docs/spec/tolerances.md)"),
  vacuityFactor: entry(100, "oracle/compare.ts",
    "a tensor is non-vacuous when its largest reference magnitude is at least this multiple of atol",
    "a tensor within 100 atol of zero is compared only through atol: its check could not fail"),
} as const;

/** C6 (kernel fixtures replayed under the f32 policy, conformance/c6/replay.ts). */
export const C6 = {
  f32FloorUlps: entry(8, "conformance/c6/replay.ts",
    "the f32 fixture rule's floor, in f32 unit roundoffs of the tensor's scale",
    "a fixture written by another f32 implementation is a few f32 rounding steps off where the plain f32 run happens to be exact"),
  f32Vacuity: entry(1e-6, "conformance/c6/replay.ts",
    "near-zero for the vacuity rule under the f32 policy (it has no atol)",
    "the same level as the kernel judge's exercised threshold"),
} as const;

/** C9 (torch against TypeScript, two f64 implementations; docs/spec/conformance.md#c9-conditioning). */
export const C9 = {
  tolerance: entry(1e-10, "conformance/c9/checks.ts",
    "max|torch − ts| / max(max|ts|, group floor)",
    "measured on correct implementations at most ~1.2e-14 (the two sum in different orders); 1e-10 leaves four orders of margin and is far below any modelling error"),
  groupFloor: entry(1e-3, "conformance/c9/compare.ts",
    "a tensor's reference scale is at least this fraction of the largest max|ts| of its group (or of the case when the group is zero)",
    "a tensor zero by a symmetry would otherwise compare its rounding residue to itself"),
  orderFactor: entry(100, "conformance/c9/compare.ts",
    "an ill-conditioned tensor is allowed this multiple of its order spread",
    "on correct implementations torch's difference from TypeScript stays within a few spreads (docs/spec/conformance.md#c9-conditioning)"),
  spreadCap: entry(1e-6, "conformance/c9/compare.ts",
    "the most an ill-conditioned tensor's allowance may be",
    "above it no conditioning excuses a difference between two f64 implementations"),
} as const;

/** py: kernels (docs/spec/py-backend.md#implausible). */
export const PY = {
  implausible: entry(1e3, "conformance/kernel/python/plausible.ts",
    "an error this many times the tensor's largest |ref64| (at least 1) is beyond any plausible range: the message says what is likely wrong",
    "rounding moves a value by a fraction of its magnitude and a slip in the arithmetic by about its magnitude; a thousand times means misread data"),
} as const;

/** The table in the order precision.md lists it. */
export const PRECISION_TABLE: readonly (readonly [string, TableEntry<unknown>])[] = [
  ["unit roundoff", UNIT_ROUNDOFF],
  ["kernel: bound factor", KERNEL.boundFactor],
  ["kernel: floor", KERNEL.floorRel],
  ["kernel: group floor", KERNEL.groupFloor],
  ["kernel: tf32 group floor", KERNEL.groupFloorTF32],
  ["kernel: exercised", KERNEL.exercised],
  ["kernel: ill-conditioned", KERNEL.illConditioned],
  ["bias: k", BIAS.k],
  ["bias: plain factor", BIAS.plainFactor],
  ["bias: floor", BIAS.floor],
  ["bias: tf32 floor", BIAS.floorTF32],
  ["bias: tf32 fewest elements", BIAS.minElementsTF32],
  ["power: scale errors", POWER.scaleEps],
  ["power: material", POWER.material],
  ["tape: hand-written", TAPE.handWritten],
  ["tape: finite differences", TAPE.finiteDifferences],
  ["tape: vacuity factor", TAPE.vacuityFactor],
  ["C6: f32 floor (u)", C6.f32FloorUlps],
  ["C6: f32 vacuity", C6.f32Vacuity],
  ["C9: tolerance", C9.tolerance],
  ["C9: group floor", C9.groupFloor],
  ["C9: order factor", C9.orderFactor],
  ["C9: spread cap", C9.spreadCap],
  ["py: implausible", PY.implausible],
];

function num(x: number): string {
  if (x === 0) return "0";
  const e = Math.log2(Math.abs(x));
  if (Number.isInteger(e) && Math.abs(e) > 6) return `2^${e}`;
  return Math.abs(x) >= 1e-3 && Math.abs(x) < 1e4 ? String(x) : x.toExponential().replace("e+", "e");
}

function show(v: unknown): string {
  if (typeof v === "number") return num(v);
  if (Array.isArray(v)) return v.map((x) => show(x)).join(", ");
  if (typeof v === "object" && v !== null) return Object.entries(v).map(([k, x]) => `${k} ${show(x)}`).join(", ");
  return String(v);
}

/** precision.md's table, as markdown rows under a header (the text between its markers). */
export function renderPrecisionTable(): string {
  // a "|" inside a cell is escaped, or markdown would split the cell there
  const cell = (t: string) => t.replace(/\|/g, "\\|");
  const rows = PRECISION_TABLE.map(([name, e]) => `| ${cell(name)} | ${cell(show(e.value))} | \`${e.module}\` | ${cell(e.what)} | ${cell(e.reason)} |`);
  return ["| constant | value | applied in | what it bounds | why this value |", "|---|---|---|---|---|", ...rows].join("\n");
}
