/**
 * Detection power and output mutations of the kernel judge (docs/spec/precision.md#power,
 * docs/spec/conformance.md#signatures).
 *
 * Power: for one compared tensor, the smallest relative scale error ε that the judge would have
 * failed — the kernel's values replaced by kernel + s·ε·ref64 (s = ±1: the kernel's own error kept,
 * a scale error of either sign added) — worked out exactly from the max-norm bound per sequence and
 * from the bias test's slope threshold over the tensor's elements.
 *
 * Mutations: copies of a passing case's kernel outputs with typical bug signatures applied (a
 * scale, a sign flip, a shift by one token, two heads or sequences swapped, a state transposed, an
 * element dropped, the tokens after the first chunk zeroed), judged again by the same rule without
 * running the kernel again. A signature that moves a tensor materially and is not detected is a
 * blind spot of the check.
 *
 * What a check keeps across its cases (the per-tensor power, which signatures any case detected)
 * is a ledger tied to the `exercised` set every kernel check already threads through its cases.
 */
import { POWER } from "./precision-table.ts";
/** Which test of the judge gives a tensor its power. */
export type PowerTest = "bound" | "bias";

/** One tensor's power in one case, or over a check's cases (null: no scale error would be detected). */
export interface TensorPower {
  /** The smallest |ε| at which a scale error of either sign fails the judge. */
  power: number | null;
  /** The same from the bound alone, and from the bias test alone. */
  bound: number | null;
  bias: number | null;
  by: PowerTest;
  group: "out" | "grad";
}

/** The smallest ε > 0 with max_i |e_i + s·ε·r_i| > bound, for s = +1 and s = -1 (e = kernel − ref64). */
export function boundPowerBySign(kernel: ArrayLike<number>, ref64: ArrayLike<number>, bound: number): [number, number] {
  let plus = Infinity, minus = Infinity;
  for (let i = 0; i < ref64.length; i++) {
    const r = ref64[i]!, a = Math.abs(r);
    if (!(a > 0)) continue;
    // |e + s·ε·r| grows past the bound on the side where s·ε·r has the sign of r: ε > (bound − s·sgn(r)·e) / |r|
    const e = (kernel[i]! - r) * Math.sign(r);
    plus = Math.min(plus, (bound - e) / a);
    minus = Math.min(minus, (bound + e) / a);
  }
  return [Math.max(plus, 0), Math.max(minus, 0)];
}

/** The bias test's power by sign: |slope + s·ε| crosses the threshold at ε = threshold − s·slope. */
export function biasPowerBySign(slope: number, threshold: number): [number, number] {
  return [Math.max(threshold - slope, 0), Math.max(threshold + slope, 0)];
}

/** Combines the two tests' powers by sign: a scale error of magnitude ε and either sign is detected from max over s of min over tests. */
export function combinePower(bound: [number, number], bias: [number, number], group: "out" | "grad"): TensorPower {
  const both = Math.max(Math.min(bound[0], bias[0]), Math.min(bound[1], bias[1]));
  const b = Math.max(...bound), s = Math.max(...bias);
  const fin = (x: number) => (Number.isFinite(x) ? x : null);
  return { power: fin(both), bound: fin(b), bias: fin(s), by: b <= s ? "bound" : "bias", group };
}

/** A check's power summary (`details.power`): the weakest tensor, the weakest gradient, every tensor. */
export interface CheckPower {
  /** The weakest tensor's power (null: some tensor could not detect any scale error). */
  power: number | null;
  tensor: string;
  by: PowerTest;
  /** The same over the gradients only (what --min-power gates); absent for a check that compares no gradient. */
  gradient?: { power: number | null; tensor: string; by: PowerTest };
  /** Per tensor: its power, the test that gives it, and each test's own power. */
  tensors: Record<string, { power: number | null; by: PowerTest; bound: number | null; bias: number | null }>;
}

const weaker = (a: number | null, b: number | null) => (a === null ? true : b === null ? false : a >= b);

/** The summary of per-tensor powers (null when there are none). */
export function summarizePower(tensors: ReadonlyMap<string, TensorPower>): CheckPower | null {
  let all: [string, TensorPower] | undefined, grad: [string, TensorPower] | undefined;
  const out: CheckPower["tensors"] = {};
  for (const [name, p] of tensors) {
    out[name] = { power: sig(p.power), by: p.by, bound: sig(p.bound), bias: sig(p.bias) };
    if (all === undefined || weaker(p.power, all[1].power)) all = [name, p];
    if (p.group === "grad" && (grad === undefined || weaker(p.power, grad[1].power))) grad = [name, p];
  }
  if (all === undefined) return null;
  return {
    power: sig(all[1].power), tensor: all[0], by: all[1].by,
    ...(grad !== undefined ? { gradient: { power: sig(grad[1].power), tensor: grad[0], by: grad[1].by } } : {}),
    tensors: out,
  };
}

const sig = (x: number | null) => (x === null ? null : Number(x.toPrecision(3)));

// ---------------------------------------------------------------------------------------------
// Output mutations

/** The bug signatures applied to a passing case's outputs (docs/spec/conformance.md#signatures). */
export const SIGNATURES = [
  "scale", "sign-flip", "token-shift", "heads-swap", "sequences-swap", "state-transpose", "element-drop", "after-first-chunk-zeroed",
] as const;
export type Signature = (typeof SIGNATURES)[number];

/** The scale errors tried, smallest first. */
export const SCALE_EPS = POWER.scaleEps.value;

/**
 * A mutation is material when it moves its tensor by more than this fraction of the tensor's
 * largest reference value (docs/spec/conformance.md#signatures): a change below 1% of a tensor's
 * scale is within a bf16 kernel's own rounding, and 1% is the scale error --min-power is built around.
 */
export const MATERIAL = POWER.material.value;

/** The layout of a case's sequences: n = b·H + h, per-token tensors [T, w], and the chunk size the kernel ran at. */
export interface CaseLayout {
  readonly B: number;
  readonly H: number;
  readonly T: number;
  readonly C?: number;
}

/** One compared tensor of a case as the mutations see it: its sequences' kernel values and ref64. */
export interface MutTensor {
  readonly name: string;
  /** "token": [T, w] per sequence; "state": one block per sequence (a final state or its gradient); undefined: unknown. */
  readonly part?: "token" | "state";
  readonly kernel: readonly ArrayLike<number>[];
  readonly seqs: readonly number[];
}

/** A signature applied to one tensor: the mutated kernel values per sequence, or why it does not apply. */
export type Mutated = { values: ArrayLike<number>[] } | { skip: string };

function swapSeqs(t: MutTensor, a: number, b: number): Mutated {
  const ia = t.seqs.indexOf(a), ib = t.seqs.indexOf(b);
  if (ia < 0 || ib < 0) return { skip: `sequences ${a} and ${b} not both compared` };
  const v = [...t.kernel];
  [v[ia], v[ib]] = [v[ib]!, v[ia]!];
  return { values: v };
}

/** The tensor's kernel values with one signature (and, for `scale`, its ε) applied. */
export function mutate(sig: Signature, t: MutTensor, layout: CaseLayout | undefined, eps = 0): Mutated {
  const each = (f: (k: ArrayLike<number>) => ArrayLike<number>): Mutated => ({ values: t.kernel.map(f) });
  const map = (f: (x: number) => number) => each((k) => Float64Array.from(k, f));
  switch (sig) {
    case "scale":
      return map((x) => x * (1 + eps));
    case "sign-flip":
      return map((x) => -x);
    case "element-drop":
      // the element of each sequence that matters most: the largest in magnitude
      return each((k) => {
        const out = Float64Array.from(k);
        let at = 0;
        for (let i = 1; i < k.length; i++) if (Math.abs(k[i]!) > Math.abs(k[at]!)) at = i;
        out[at] = 0;
        return out;
      });
  }
  if (layout === undefined) return { skip: "the case's layout (B, H, T, chunk size) is not known to the judge" };
  const { B, H, T, C } = layout;
  switch (sig) {
    case "heads-swap":
      return H < 2 ? { skip: "H = 1" } : swapSeqs(t, 0, 1);
    case "sequences-swap":
      return B < 2 ? { skip: "B = 1" } : swapSeqs(t, 0, H);
    case "token-shift":
      if (t.part !== "token") return { skip: "not a per-token tensor" };
      if (T < 2) return { skip: "T = 1" };
      return each((k) => {
        const w = k.length / T, out = new Float64Array(k.length);
        for (let i = w; i < k.length; i++) out[i] = k[i - w]!;
        return out;
      });
    case "after-first-chunk-zeroed":
      if (t.part !== "token") return { skip: "not a per-token tensor" };
      if (C === undefined) return { skip: "no chunk size" };
      if (T <= C) return { skip: `T <= chunk size (${C})` };
      return each((k) => {
        const w = k.length / T, out = Float64Array.from(k);
        out.fill(0, C * w);
        return out;
      });
    case "state-transpose": {
      if (t.part !== "state") return { skip: "not a state tensor" };
      const n = t.kernel[0]?.length ?? 0, m = Math.round(Math.sqrt(n));
      if (m < 2 || m * m !== n) return { skip: "not a square matrix state" };
      return each((k) => {
        const out = new Float64Array(n);
        for (let i = 0; i < m; i++) for (let j = 0; j < m; j++) out[i * m + j] = k[j * m + i]!;
        return out;
      });
    }
  }
  return { skip: "unknown signature" };
}

/** How one signature (at one ε) fared on one tensor of one case. */
export interface MutationOutcome {
  sig: Signature;
  eps?: number;
  tensor: string;
  /** Why it does not apply, when it does not. */
  skip?: string;
  material: boolean;
  detected: boolean;
}

/** Whether a mutation is material: it moves the tensor by more than MATERIAL of its largest |ref64| (and past the vacuity floor). */
export function isMaterial(orig: readonly ArrayLike<number>[], mutated: readonly ArrayLike<number>[], refMax: number, floor: number): boolean {
  let d = 0;
  orig.forEach((o, s) => {
    const m = mutated[s]!;
    for (let i = 0; i < o.length; i++) d = Math.max(d, Math.abs(m[i]! - o[i]!));
  });
  return d > MATERIAL * refMax && d > floor;
}

/** What one check's signatures came to over its cases (`details.signatures`). */
export interface SignatureResult {
  status: "detected" | "blind-spot" | "immaterial" | "not-exercised";
  /** scale: the smallest ε detected in every tensor. */
  eps?: number;
  /** Blind spot: the tensors (at ε) a material mutation went undetected in, in every case. */
  undetected?: string[];
  /** Cases the signature applied to. */
  cases: number;
  /** Not exercised: why (the last case's reason). */
  reason?: string;
}

interface InstanceTally {
  material: boolean;
  detected: boolean;
}

/** What a kernel check accumulates over its cases. */
export class JudgeLedger {
  readonly power = new Map<string, TensorPower>();
  private readonly instances = new Map<Signature, Map<string, InstanceTally>>();
  private readonly cases = new Map<Signature, number>();
  private readonly reasons = new Map<Signature, string>();

  /** Tensors left unjudged as ill-conditioned (docs/spec/precision.md#ill-conditioned): per tensor, how many (case, sequence) and the largest relative plain error. */
  readonly illConditioned = new Map<string, { count: number; plain_rel: number }>();

  addIllConditioned(tensor: string, plainRel: number): void {
    const o = this.illConditioned.get(tensor) ?? { count: 0, plain_rel: 0 };
    this.illConditioned.set(tensor, { count: o.count + 1, plain_rel: Math.max(o.plain_rel, plainRel) });
  }

  /** A case's per-tensor power: the check detects what any case detects, so it keeps the smallest. */
  addPower(name: string, p: TensorPower): void {
    const old = this.power.get(name);
    if (old === undefined) {
      this.power.set(name, { ...p });
      return;
    }
    const min = (a: number | null, b: number | null) => (a === null ? b : b === null ? a : Math.min(a, b));
    const power = min(old.power, p.power), bound = min(old.bound, p.bound), bias = min(old.bias, p.bias);
    this.power.set(name, { power, bound, bias, by: (bound ?? Infinity) <= (bias ?? Infinity) ? "bound" : "bias", group: p.group });
  }

  /** A case's mutation outcomes. */
  addMutations(outcomes: readonly MutationOutcome[]): void {
    const applied = new Set<Signature>();
    for (const o of outcomes) {
      if (o.skip !== undefined) {
        this.reasons.set(o.sig, o.skip);
        continue;
      }
      applied.add(o.sig);
      const key = o.eps === undefined ? o.tensor : `${o.tensor} at ε = ${o.eps}`;
      let m = this.instances.get(o.sig);
      if (m === undefined) this.instances.set(o.sig, (m = new Map()));
      const t = m.get(key) ?? { material: false, detected: false };
      t.material ||= o.material;
      t.detected ||= o.detected;
      m.set(key, t);
      if (o.eps !== undefined) {
        const per = this.scaleByEps.get(o.eps) ?? new Map<string, boolean>();
        per.set(o.tensor, (per.get(o.tensor) ?? false) || o.detected);
        this.scaleByEps.set(o.eps, per);
      }
    }
    for (const s of applied) this.cases.set(s, (this.cases.get(s) ?? 0) + 1);
  }
  private readonly scaleByEps = new Map<number, Map<string, boolean>>();

  hasMutations(): boolean {
    return this.cases.size > 0 || this.reasons.size > 0;
  }

  /** Per signature: detected, a blind spot, immaterial, or never exercised (with why). */
  signatures(): Record<Signature, SignatureResult> {
    const out = {} as Record<Signature, SignatureResult>;
    for (const s of SIGNATURES) {
      const inst = this.instances.get(s), cases = this.cases.get(s) ?? 0;
      if (inst === undefined || cases === 0) {
        out[s] = { status: "not-exercised", cases: 0, reason: this.reasons.get(s) ?? "no passing case" };
        continue;
      }
      const undetected = [...inst].filter(([, t]) => t.material && !t.detected).map(([k]) => k);
      const anyMaterial = [...inst.values()].some((t) => t.material);
      const r: SignatureResult = { status: undetected.length > 0 ? "blind-spot" : anyMaterial ? "detected" : "immaterial", cases };
      if (undetected.length > 0) r.undetected = undetected;
      if (s === "scale") {
        const eps = [...this.scaleByEps.keys()].sort((a, b) => a - b).find((e) => [...this.scaleByEps.get(e)!.values()].every(Boolean));
        if (eps !== undefined) r.eps = eps;
        else if (r.status === "detected") r.status = "immaterial";
      }
      out[s] = r;
    }
    return out;
  }

  /** The blind spots as one line each (`details.blind_spots`). */
  blindSpots(): string[] {
    return Object.entries(this.signatures())
      .filter(([, r]) => r.status === "blind-spot")
      .map(([s, r]) => `${s}: ${r.undetected!.join(", ")} changed by more than ${MATERIAL * 100}% of its scale and passed`);
  }
}

const ledgers = new WeakMap<Set<string>, JudgeLedger>();

/** The ledger of the check whose cases thread this `exercised` set. */
export function ledgerOf(exercised: Set<string>): JudgeLedger {
  let l = ledgers.get(exercised);
  if (l === undefined) ledgers.set(exercised, (l = new JudgeLedger()));
  return l;
}

/** The check-level details a ledger adds to a result (`power`, `signatures`, `blind_spots`); no timings, so a seed's report stays the same. */
export function ledgerDetails(l: JudgeLedger): Record<string, unknown> {
  const power = summarizePower(l.power);
  const out: Record<string, unknown> = {};
  if (power !== null) out.power = power;
  if (l.illConditioned.size > 0) out.ill_conditioned = Object.fromEntries(l.illConditioned);
  if (l.hasMutations()) {
    out.signatures = l.signatures();
    out.blind_spots = l.blindSpots();
  }
  return out;
}
