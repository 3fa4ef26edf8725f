/**
 * The kernel judge (docs/spec/precision.md#flash): one case of a kernel's
 * tensors against ref64 under the flash-attention bound, per tensor and sequence, with the plain
 * reference at the kernel's precision as the yardstick (oracle/plain-reference.ts), the floors per
 * accumulate dtype, the bias test (oracle/bias.ts), and the check-level vacuity rule: a passing
 * check in which some compared tensor never carried a non-trivial reference value proves nothing
 * about that tensor. C5's native and py: checks and C6's kernel replay all judge through it.
 */
import { biasVerdict } from "./bias.ts";
import {
  biasPowerBySign, boundPowerBySign, combinePower, isMaterial, ledgerDetails, ledgerOf, mutate, SCALE_EPS, SIGNATURES,
  type CaseLayout, type JudgeLedger, type MutationOutcome, type MutTensor,
} from "./kernel-power.ts";
import { flashRule, type CaseVerdict, type Worst } from "./compare.ts";
import { concat, maxAbs } from "../src/numeric.ts";
import type { Precision } from "../src/precision.ts";
import { FAST_PAIR_RULES } from "./matrix-fast.ts";
import { KERNEL } from "./precision-table.ts";

/** Relative floor of the flash-attention bound, per tensor and sequence, for a kernel that sums in f64 (oracle/precision-table.ts). */
export const FLOOR_REL = KERNEL.floorRel.value.f64;
/** The same for a kernel that sums in f32 (docs/spec/precision.md#floors; the reason in oracle/precision-table.ts). */
export const FLOOR_REL_F32_ACC = KERNEL.floorRel.value.f32;

export function floorRel(accumulate: Precision["accumulate"]): number {
  return KERNEL.floorRel.value[accumulate];
}
/** A compared tensor whose |ref64| never exceeds this in any case of a check was never exercised. */
export const EXERCISED = KERNEL.exercised.value;

/** The judge as a check's report states its tolerance. */
export const KERNEL_TOLERANCE: Readonly<Record<string, unknown>> = {
  kind: "flash-attention rule (docs/spec/precision.md#flash)",
  bound: "per tensor and sequence: max|kernel - ref64| <= 2 * max|ref32 - ref64| + floor",
  ref32: "the TypeScript reference run on f32 tensors (same inputs, rounded to the kernel's storage dtype once), summed in the kernel's accumulate dtype; " +
    "for a kernel summing in f32, per element the farthest from ref64 of ten runs (natural order, reversed, eight with random rounding; docs/spec/precision.md#orders); " +
    `for the rules with a fast pair (${FAST_PAIR_RULES.join(", ")}) the natural order alone (docs/spec/precision.md#orders-matrix)`,
  floor: `${FLOOR_REL} * max|ref64| (a kernel summing in f32: ${FLOOR_REL_F32_ACC} * max|ref64|)`,
  floor_reason:
    "on tiny cases (s = 1, d = 1) the f32 reference can be exact, while a kernel that sums in another order (threads, " +
    "FMA on a GPU) is a few f32 roundings (2^-24 relative each) off; 1e-6 relative is ~16 roundings of the largest value",
  vacuity: `a case whose compared references are all below ${EXERCISED} is vacuous; so is a check in which some compared tensor never exceeds it`,
  ill_conditioned: "a tensor whose plain reference is farther from ref64 than 1e-2 (f32 and f16 storage) or 5e-2 (bf16) of its largest reference value is " +
    "not judged in that case and is listed in details.ill_conditioned (docs/spec/precision.md#ill-conditioned)",
};


/** One tensor of one sequence: the kernel's values (undefined when it does not return them) and both references. */
export interface Compared {
  /** The report's name of the tensor (cases/kernel-tensors.ts tensorName). */
  name: string;
  /** Outputs and gradients: a tensor zero by the math takes its floor from its group. */
  group: "out" | "grad";
  seq: number;
  kernel: ArrayLike<number> | undefined;
  ref64: ArrayLike<number>;
  ref32: ArrayLike<number>;
  /** "token": [T, w] per sequence; "state": a final state or its gradient (what the shape-dependent mutations need). */
  part?: "token" | "state";
  /**
   * How a failure message names the tensor, when not by `name`: a py: kernel's own keyword first,
   * ours in brackets (`dg [dalpha]`, `dinitial_state [dM (initial state)]`; cases/kernel-tensors.ts).
   */
  label?: string;
  /** The tensor's shape where no batch layout places its elements (tape-e2e): a failure names the element by its multi-index. */
  shape?: readonly number[];
}

/**
 * An element of a compared tensor as the kernel's batch holds it: sequence n = b·H + h; a per-token
 * tensor is [T, w] per sequence, (b, t, h, i); a square state block (d x d) is (b, h, i, j), another
 * state block (b, h, i) over its flat entries. `[index]` where the layout is not known (tape-e2e, a
 * packed batch) or the tensor's length does not fit it.
 */
export function elementAt(it: Pick<Compared, "part" | "seq" | "ref64" | "shape">, index: number, layout: CaseLayout | undefined): string {
  if (layout === undefined || it.part === undefined || layout.H < 1) return multiIndex(index, it.shape, it.ref64.length);
  const b = Math.floor(it.seq / layout.H), h = it.seq % layout.H, n = it.ref64.length;
  if (it.part === "token") {
    const w = n / layout.T;
    if (!Number.isInteger(w) || w < 1) return `[${index}]`;
    const t = Math.floor(index / w);
    return w === 1 ? `(b=${b}, t=${t}, h=${h})` : `(b=${b}, t=${t}, h=${h}, i=${index % w})`;
  }
  const d = Math.round(Math.sqrt(n));
  return d > 1 && d * d === n ? `(b=${b}, h=${h}, i=${Math.floor(index / d)}, j=${index % d})` : `(b=${b}, h=${h}, i=${index})`;
}

/** `[i, j, ...]` of a flat index in C order of `shape` (when it holds `n` elements), else `[index]`. */
function multiIndex(index: number, shape: readonly number[] | undefined, n: number): string {
  if (shape === undefined || shape.length < 2 || shape.reduce((a, b) => a * b, 1) !== n) return `[${index}]`;
  const at: number[] = [];
  let rest = index;
  for (let i = shape.length - 1; i >= 0; i--) {
    at.unshift(rest % shape[i]!);
    rest = Math.floor(rest / shape[i]!);
  }
  return `[${at.join(", ")}]`;
}

/** How a judge call is run beyond its items (docs/spec/precision.md#power). */
export interface JudgeOptions {
  /** The case's batch layout and chunk size: what the shape-dependent output mutations need. */
  layout?: CaseLayout;
  /** Judge mutated copies of a passing case's outputs (default true). */
  mutations?: boolean;
  /**
   * The kernel's outputs were NaN-filled before the call (a native library's, ffi/lib-wire.ts), so a NaN
   * where the reference is finite is an element it did not write. Otherwise (a py: kernel returns
   * its own tensors) a NaN is one it computed.
   */
  prefilled?: boolean;
  /**
   * Test-only: multiplies every bound and bias threshold (a deliberately weakened judge, to prove
   * that blind spots and --min-power show it). Never set by a check.
   */
  slack?: number;
}

/** The first index where the kernel is not finite but the reference is, or -1. */
function firstNonFinite(kernel: ArrayLike<number>, ref: ArrayLike<number>): number {
  for (let i = 0; i < kernel.length; i++) if (!Number.isFinite(kernel[i]!) && Number.isFinite(ref[i]!)) return i;
  return -1;
}

/** A tensor's floor is at least this fraction of the floor of the largest tensor of its group in the case. */
export const GROUP_FLOOR = KERNEL.groupFloor.value;
/** The group fraction of an accumulate dtype: GROUP_FLOOR, and for TF32 products the whole group (docs/spec/precision.md#tf32). */
export function groupFloor(accumulate: Precision["accumulate"]): number {
  return accumulate === "tf32" ? KERNEL.groupFloorTF32.value : GROUP_FLOOR;
}

function groupMax(items: Compared[], group: Compared["group"]): number {
  let m = 0;
  for (const it of items) if (it.group === group) m = Math.max(m, maxAbs(it.ref64));
  return m;
}

/** The floor of one item's bound: relative to its largest reference value, or its group's for tensors zero by the math. */
function floorOf(it: Compared, items: Compared[], p: Precision): number {
  // A tensor that is zero by the math (MEMORA's dk, dv at d = 1) has only roundoff in ref64, so a
  // floor relative to it would be ~1e-22 while a kernel's f32 sums leave ~1e-9: its floor is
  // taken relative to the case's largest tensor of the same kind (outputs, or gradients) instead,
  // scaled down by GROUP_FLOOR, as C9 does (docs/spec/precision.md#floors).
  return floorRel(p.accumulate) * Math.max(maxAbs(it.ref64), groupFloor(p.accumulate) * groupMax(items, it.group));
}

/** Our kernels' precision, and what a kernel is judged as when it declares nothing else. */
export const F32_STORE_F64_ACC: Precision = { storage: "f32", state: "f32", accumulate: "f64" };

const sig = (x: number) => Number(x.toPrecision(4));

/**
 * The bias test (docs/spec/precision.md#bias) per tensor over every sequence of the case, and the
 * per-tensor measurements the report keeps: the largest error, the plain reference's error and the
 * bound (at the sequence closest to its bound), and the bias statistic.
 */
function biasAndDetails(items: Compared[], p: Precision, slack: number, ledger: JudgeLedger): { failure?: string; failedTensor?: string; details: Record<string, unknown> } {
  const tensors: Record<string, Record<string, number | boolean | string | null>> = {};
  let failure: string | undefined, failedTensor: string | undefined;
  for (const name of [...new Set(items.map((i) => i.name))]) {
    const mine = items.filter((i) => i.name === name && i.kernel !== undefined && i.kernel.length === i.ref64.length);
    if (mine.length === 0) continue;
    let err = 0, plain = 0, bound = 0, floor = 0, ratio = -1;
    const boundBySign: [number, number] = [Infinity, Infinity];
    for (const it of mine) {
      const f = floorOf(it, items, p);
      const k = flashRule(it.kernel!, it.ref64, it.ref32, f);
      const b = k.bound * slack;
      const [up, down] = boundPowerBySign(it.kernel!, it.ref64, b);
      boundBySign[0] = Math.min(boundBySign[0], up);
      boundBySign[1] = Math.min(boundBySign[1], down);
      const r = b > 0 ? k.err / b : k.err === 0 ? 0 : Infinity;
      if (r > ratio) {
        ratio = r;
        err = k.err;
        plain = k.errRef;
        bound = b;
        floor = f;
      }
    }
    const ref64 = concat(mine.map((i) => i.ref64));
    const v = biasVerdict(concat(mine.map((i) => i.kernel!)), ref64, concat(mine.map((i) => i.ref32)), p);
    const threshold = v.threshold * slack;
    const biased = !(Math.abs(v.slope) <= threshold);
    // a bias on values that never left the vacuity floor is no evidence: such a tensor detects nothing
    const live = maxAbs(ref64) > EXERCISED;
    const power = combinePower(live ? boundBySign : [Infinity, Infinity], live ? biasPowerBySign(v.slope, threshold) : [Infinity, Infinity], mine[0]!.group);
    if (live) ledger.addPower(name, power);
    tensors[name] = {
      err: sig(err), plain: sig(plain), floor: sig(floor), bound: sig(bound), slope: sig(v.slope), sigma: sig(v.sigma), plainTerm: sig(v.plainTerm),
      threshold: sig(threshold), bias: biased, power: power.power === null ? null : sig(power.power), power_by: power.by,
    };
    if (biased && failure === undefined && live) {
      failedTensor = name;
      failure = `${mine[0]!.label ?? name}: systematic bias, slope of (kernel - ref64) on ref64 = ${v.slope.toExponential(3)} (${(Math.abs(v.slope) / v.sigma).toFixed(1)} standard errors) ` +
        `exceeds max(${v.k}σ = ${(v.k * v.sigma).toExponential(2)}, 2‖plain − ref64‖/‖ref64‖ = ${v.plainTerm.toExponential(2)}, ${p.accumulate === "tf32" ? "tf32" : p.storage} floor ${v.floor}) ` +
        `(docs/spec/precision.md#bias)`;
    }
  }
  return { failure, failedTensor, details: { precision: { ...p }, tensors } };
}

/**
 * Applies the flash-attention bound and the bias test to every item (the plain reference in ref32
 * run at the kernel's declared precision); records which tensors were exercised, each tensor's
 * detection power (docs/spec/precision.md#power) and, on a passing case, how mutated copies of its
 * outputs fare (docs/spec/conformance.md#signatures) into the check's ledger.
 */
export function flashCompare(all: Compared[], exercised: Set<string>, who: string, precision: Precision = F32_STORE_F64_ACC, opts: JudgeOptions = {}): CaseVerdict {
  const slack = opts.slack ?? 1;
  // a case whose f64 reference is itself not finite lies outside the rule's range: no verdict on the
  // kernel can be drawn from it (docs/spec/precision.md#reference-not-finite)
  const broken = all.find((it) => !allFinite(it.ref64));
  if (broken !== undefined) {
    return {
      ok: false, vacuous: true,
      message: `the f64 reference is not finite in ${broken.label ?? broken.name} (sequence ${broken.seq}): the case overflows the rule's range, not judged (docs/spec/precision.md#reference-not-finite)`,
    };
  }
  // tensors whose plain reference is itself far from ref64 are not judged (docs/spec/precision.md#ill-conditioned)
  const ill: { tensor: string; seq: number; plain_rel: number }[] = [];
  const items = all.filter((it) => {
    const rel = illConditioned(it, precision);
    if (rel === undefined) return true;
    ill.push({ tensor: it.name, seq: it.seq, plain_rel: sig(rel) });
    ledgerOf(exercised).addIllConditioned(it.name, sig(rel));
    return false;
  });
  if (items.length === 0 && ill.length > 0) {
    return { ok: false, vacuous: true, message: `every compared tensor is ill-conditioned at ${precision.storage} (docs/spec/precision.md#ill-conditioned)`, details: { ill_conditioned: ill } };
  }
  const verdict = judgeItems(items, exercised, who, precision, opts, slack);
  return ill.length === 0 ? verdict : { ...verdict, details: { ...(verdict.details ?? {}), ill_conditioned: ill } };
}

/**
 * Where the plain reference of the kernel's precision is itself this far from ref64, relative to
 * the tensor's largest reference value, the computation amplifies rounding (Moneta's L_q
 * normalisation over a thousand tokens: the plain f32 reference 18% from ref64, the correct kernel
 * 47%), and two correct computations at that precision differ by more than the factor of two of
 * the bound covers. 1e-2 for f32 and f16 storage, 5e-2 for bf16: almost five times the largest relative
 * plain error of a judged tensor in the default run's kernel checks (2.1e-3: sums that cancel, MEMORA's
 * dα and Trellis' dS_K_0, which the ten-run yardstick judges as it should), and for bf16 well past
 * its storage rounding (docs/spec/precision.md#ill-conditioned).
 */
export const ILL_CONDITIONED: Readonly<Record<Precision["storage"], number>> = KERNEL.illConditioned.value;

/** Whether a tensor whose plain reference is `plainErr` from ref64 (largest |ref64|: `refMax`) is ill-conditioned at storage `s`. */
export function isIllConditioned(plainErr: number, refMax: number, s: Precision["storage"]): boolean {
  // a non-finite plain reference is a failure of the bound, not a reason to skip it
  return refMax > EXERCISED && Number.isFinite(plainErr) && plainErr > ILL_CONDITIONED[s] * refMax;
}

/** max|plain − ref64| / max|ref64| of an ill-conditioned item, else undefined (judged as usual). */
function illConditioned(it: Compared, p: Precision): number | undefined {
  if (it.kernel === undefined || it.kernel.length !== it.ref64.length || it.ref32.length !== it.ref64.length) return undefined;
  const mag = maxAbs(it.ref64), plain = flashRule(it.kernel, it.ref64, it.ref32, 0).errRef;
  return isIllConditioned(plain, mag, p.storage) ? plain / mag : undefined;
}

/** One tensor of one sequence over its bound: its message, how far over (err / bound; Infinity: missing or not finite), its short name. */
export interface Failing<W = Worst> {
  readonly message: string;
  readonly ratio: number;
  readonly where: string;
  readonly worst?: W;
}

/** How many other failing tensors a headline lists by name. */
const OTHERS_LISTED = 6;

/**
 * A case's failure message from every tensor over its bound: the headline is the one furthest over
 * relative to its bound (the first of equals: a missing or non-finite tensor before any number),
 * the others listed after it by how far over they are (docs/spec/precision.md#headline).
 */
export function headline<W>(failing: readonly Failing<W>[]): Failing<W> | undefined {
  if (failing.length === 0) return undefined;
  const order = failing.map((f, i) => [f, i] as const).sort(([a, i], [b, j]) => (b.ratio === a.ratio ? i - j : b.ratio > a.ratio ? 1 : -1)).map(([f]) => f);
  const [top, ...rest] = order;
  if (rest.length === 0) return top;
  const x = (f: Failing<W>) => (Number.isFinite(f.ratio) ? `${f.where} ${Number(f.ratio.toPrecision(3))}x its bound` : `${f.where} missing or not finite`);
  const more = rest.length > OTHERS_LISTED ? `, and ${rest.length - OTHERS_LISTED} more` : "";
  return { ...top!, message: `${top!.message}; also over its bound: ${rest.slice(0, OTHERS_LISTED).map(x).join(", ")}${more}` };
}

function judgeItems(items: Compared[], exercised: Set<string>, who: string, precision: Precision, opts: JudgeOptions, slack: number): CaseVerdict {
  const ledger = ledgerOf(exercised);
  let worst: Worst | undefined;
  let worstRatio = -1;
  // every tensor of a sequence over its bound; the headline (and the report's worst) is the furthest over
  const failing: Failing[] = [];
  // per tensor its worst element over the sequences (a bias failure's worst)
  const worstOf = new Map<string, { ratio: number; worst: Worst }>();
  let anyLive = false;
  for (const it of items) {
    const label = it.label ?? it.name;
    const where = `${label} (sequence ${it.seq})`;
    if (it.kernel === undefined) {
      failing.push({ message: `${who} does not return ${label}, which the reference computes`, ratio: Infinity, where: label });
      continue;
    }
    if (it.kernel.length !== it.ref64.length) {
      failing.push({ message: `${where}: kernel gave ${it.kernel.length} values, reference ${it.ref64.length}`, ratio: Infinity, where });
      continue;
    }
    const bad = firstNonFinite(it.kernel, it.ref64);
    if (bad >= 0) {
      const at = elementAt(it, bad, opts.layout);
      failing.push({
        message: `${where} at ${at} is ${it.kernel[bad]} where the reference is ${it.ref64[bad]}` +
          (!Number.isNaN(it.kernel[bad]!) ? "" : opts.prefilled === true
            ? " — outputs are NaN-filled before every call: the kernel did not write this element"
            : " — a NaN in the kernel's own output (its outputs are not prefilled: it computed this value)"),
        ratio: Infinity, where, worst: { abs: Infinity, rel: Infinity, tensor: `${label}[seq ${it.seq}]`, index: bad, at },
      });
      continue;
    }
    const mag = maxAbs(it.ref64);
    if (mag > EXERCISED) {
      exercised.add(it.name);
      anyLive = true;
    }
    const floor = floorOf(it, items, precision);
    const k = flashRule(it.kernel, it.ref64, it.ref32, floor);
    const bound = k.bound * slack;
    const ratio = bound > 0 ? k.err / bound : k.err === 0 ? 0 : Infinity;
    const at = elementAt(it, k.at, opts.layout);
    const here = (): Worst => ({
      abs: k.err, rel: k.err / Math.max(Math.abs(it.ref64[k.at]!), 1e-300), tensor: `${label}[seq ${it.seq}]`, index: k.at,
      ...(at.startsWith("(") ? { at } : {}),
    });
    if (ratio > worstRatio) {
      worstRatio = ratio;
      worst = here();
    }
    if (ratio > (worstOf.get(it.name)?.ratio ?? -1)) worstOf.set(it.name, { ratio, worst: here() });
    if (!(Number.isFinite(k.errRef) && k.err <= bound)) {
      failing.push({
        message: `${where}: max |kernel - ref64| = ${k.err.toExponential(3)} at ${at} (kernel ${it.kernel[k.at]}, ref64 ${it.ref64[k.at]}) ` +
          `> ${slack === 1 ? "" : `${slack} x (`}2 x ${k.errRef.toExponential(3)} (plain ${precision.storage}/${precision.accumulate}-accumulate reference) + ${floor.toExponential(3)} (floor)${slack === 1 ? "" : ")"}`,
        ratio: Number.isFinite(k.errRef) ? ratio : Infinity, where, worst: here(),
      });
    }
  }
  const bias = biasAndDetails(items, precision, slack, ledger);
  const details = bias.details;
  const failure = headline(failing);
  // the failing element: the report's worst names what the message names
  if (failure !== undefined) return { ok: false, worst: failure.worst ?? worst, message: failure.message, details };
  if (!anyLive) return { ok: false, vacuous: true, worst, message: `every compared reference value is below ${EXERCISED}`, details };
  if (bias.failure !== undefined) return { ok: false, worst: worstOf.get(bias.failedTensor!)?.worst ?? worst, message: `${who}: ${bias.failure}`, details };
  if (opts.mutations !== false) ledger.addMutations(judgeMutations(items, precision, slack, opts.layout));
  return { ok: true, worst, details };
}

/** Whether one tensor's (mutated) values fail the bound in some sequence or the bias test over its sequences. */
function detects(mine: Compared[], values: readonly ArrayLike<number>[], floors: number[], p: Precision, slack: number): boolean {
  for (let s = 0; s < mine.length; s++) {
    const it = mine[s]!, k = flashRule(values[s]!, it.ref64, it.ref32, floors[s]!);
    if (!(Number.isFinite(k.errRef) && k.err <= k.bound * slack)) return true;
  }
  const v = biasVerdict(concat(values), concat(mine.map((i) => i.ref64)), concat(mine.map((i) => i.ref32)), p);
  return !(Math.abs(v.slope) <= v.threshold * slack);
}

/**
 * The output mutations of a passing case (docs/spec/conformance.md#signatures): every signature on
 * every exercised tensor, judged by the same bound and bias test as the real outputs, without
 * running the kernel again. Only the mutated tensor is judged again: the others passed unchanged.
 */
function judgeMutations(items: Compared[], p: Precision, slack: number, layout: CaseLayout | undefined): MutationOutcome[] {
  const out: MutationOutcome[] = [];
  for (const name of [...new Set(items.map((i) => i.name))]) {
    const mine = items.filter((i) => i.name === name);
    const refMax = Math.max(...mine.map((i) => maxAbs(i.ref64)));
    if (!(refMax > EXERCISED)) continue;
    const floors = mine.map((i) => floorOf(i, items, p));
    const t: MutTensor = { name, part: mine[0]!.part, kernel: mine.map((i) => i.kernel!), seqs: mine.map((i) => i.seq) };
    const floor = Math.max(...floors);
    for (const sig of SIGNATURES) {
      for (const eps of sig === "scale" ? SCALE_EPS : [undefined]) {
        const m = mutate(sig, t, layout, eps);
        const at = eps === undefined ? {} : { eps };
        if ("skip" in m) {
          out.push({ sig, ...at, tensor: name, skip: m.skip, material: false, detected: false });
          continue;
        }
        out.push({ sig, ...at, tensor: name, material: isMaterial(t.kernel, m.values, refMax, floor), detected: detects(mine, m.values, floors, p, slack) });
      }
    }
  }
  return out;
}

/** A passing check (a CheckResult) in which some compared tensor never carried a non-trivial reference value is vacuous. */
export function coverage<R extends { status: string; runs: number; message?: string; details?: Readonly<Record<string, unknown>> }>(r: R, expected: string[], exercised: Set<string>): R {
  r = withLedger(r, exercised);
  if (r.status !== "pass") return r;
  const never = expected.filter((n) => !exercised.has(n));
  if (never.length === 0) return r;
  return { ...r, status: "vacuous", message: `never exercised in ${r.runs} cases (|ref64| <= ${EXERCISED} throughout): ${never.join(", ")}` };
}

/**
 * A finished kernel check's result with what its cases accumulated: `details.power` (per tensor the
 * best power of any case, and the weakest tensor), and for a pass `details.signatures` and
 * `details.blind_spots` (docs/spec/precision.md#power).
 */
export function withLedger<R extends { status: string; details?: Readonly<Record<string, unknown>> }>(r: R, exercised: Set<string>): R {
  const { signatures, blind_spots, ...always } = ledgerDetails(ledgerOf(exercised));
  // the signatures say what a pass would have caught: a check that failed has its own verdict
  const add = r.status === "pass" && signatures !== undefined ? { ...always, signatures, blind_spots } : always;
  if (Object.keys(add).length === 0) return r;
  return { ...r, details: { ...(r.details ?? {}), ...add } };
}

/** Whether every value of `a` is finite. */
export function allFinite(a: ArrayLike<number>): boolean {
  for (let i = 0; i < a.length; i++) if (!Number.isFinite(a[i]!)) return false;
  return true;
}
