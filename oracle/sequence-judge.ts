/**
 * The kernel judge one sequence at a time (docs/spec/precision.md#streaming): the verdict of
 * flashCompare's bound and bias test (oracle/kernel-judge.ts) from a small summary per tensor and
 * sequence, so a production batch is judged as its sequences finish, without every [B, T, H, d]
 * reference in memory at once.
 *
 * What the summary keeps is what the verdict reads: the bound's max|kernel − ref64| and
 * max|plain − ref64| (the floor is applied at the end, when the group maxima over the case are
 * known), and the bias test's sums ⟨r, r⟩, ⟨r, e⟩, ⟨e, e⟩, ‖plain − r‖² (e = kernel − r). The
 * residual sum of the slope's standard error is expanded, Σ(e − slope·r)² = ⟨e, e⟩ − slope·⟨r, e⟩:
 * algebraically the same statistic; it loses digits only when the fit explains nearly all of the
 * error, that is when the slope is many standard errors from zero anyway.
 */
import { BIAS_K, biasFloor } from "./bias.ts";
import { flashRule } from "./compare.ts";
import { allFinite, EXERCISED, floorRel, groupFloor, headline, isIllConditioned, type Compared, type Failing } from "./kernel-judge.ts";
import { maxAbs } from "../src/numeric.ts";
import type { Precision } from "../src/precision.ts";
import { BIAS, KERNEL } from "./precision-table.ts";

/** One tensor of one sequence, reduced to what the verdict needs. */
export interface SeqSummary {
  name: string;
  group: Compared["group"];
  seq: number;
  /** Why the tensor fails whatever its bound (missing, wrong length, non-finite), or null. */
  broken: string | null;
  /** Whether its f64 reference is finite (docs/spec/precision.md#reference-not-finite). */
  refFinite: boolean;
  err: number;
  at: number;
  errRef: number;
  refMax: number;
  rr: number;
  re: number;
  ee: number;
  pp: number;
  n: number;
}

/** The summary of one compared tensor of one sequence. */
export function summarise(it: Compared): SeqSummary {
  const base = { name: it.name, group: it.group, seq: it.seq, refFinite: allFinite(it.ref64), err: 0, at: 0, errRef: 0, refMax: maxAbs(it.ref64), rr: 0, re: 0, ee: 0, pp: 0, n: 0 };
  const where = `${it.name} (sequence ${it.seq})`;
  if (it.kernel === undefined) return { ...base, broken: `the kernel does not return ${it.name}, which the reference computes` };
  if (it.kernel.length !== it.ref64.length) return { ...base, broken: `${where}: kernel gave ${it.kernel.length} values, reference ${it.ref64.length}` };
  const k = flashRule(it.kernel, it.ref64, it.ref32, 0);
  let rr = 0, re = 0, ee = 0, pp = 0;
  for (let i = 0; i < it.ref64.length; i++) {
    const r = it.ref64[i]!, kv = it.kernel[i]!;
    if (!Number.isFinite(kv) && Number.isFinite(r)) return { ...base, broken: `${where}[${i}] is ${kv} where the reference is ${r}` };
    const e = kv - r, p = it.ref32[i]! - r;
    rr += r * r;
    re += r * e;
    ee += e * e;
    pp += p * p;
  }
  return { ...base, broken: null, err: k.err, at: k.at, errRef: k.errRef, rr, re, ee, pp, n: it.ref64.length };
}

export interface StreamVerdict {
  ok: boolean;
  vacuous: boolean;
  message?: string;
  /** Per tensor: the largest err/bound over its sequences, and the bias test. */
  tensors: Record<string, { err: number; plain: number; bound: number; ratio: number; slope: number; sigma: number; threshold: number; bias: boolean }>;
  /** The tensors of sequences left unjudged as ill-conditioned (docs/spec/precision.md#ill-conditioned). */
  illConditioned: { tensor: string; seq: number; plain_rel: number }[];
}

/** The verdict of a case from its summaries: flashCompare's bound per tensor and sequence, then the bias test per tensor. */
export function streamVerdict(summaries: readonly SeqSummary[], p: Precision): StreamVerdict {
  // as flashCompare: a case whose f64 reference is not finite is not judged
  const over = summaries.find((s) => !s.refFinite);
  if (over !== undefined) {
    return { ok: false, vacuous: true, message: `the f64 reference is not finite in ${over.name} (sequence ${over.seq}): the case overflows the rule's range, not judged (docs/spec/precision.md#reference-not-finite)`, tensors: {}, illConditioned: [] };
  }
  // as flashCompare: a tensor of a sequence whose plain reference is itself far from ref64 is not judged
  const ill = (s: SeqSummary) => s.broken === null && isIllConditioned(s.errRef, s.refMax, p.storage);
  const illConditioned = summaries.filter(ill).map((s) => ({ tensor: s.name, seq: s.seq, plain_rel: s.errRef / s.refMax }));
  const all = summaries.filter((s) => !ill(s));
  if (all.length === 0 && illConditioned.length > 0) {
    return { ok: false, vacuous: true, message: `every compared tensor is ill-conditioned at ${p.storage} (docs/spec/precision.md#ill-conditioned)`, tensors: {}, illConditioned };
  }
  const groupMax = { out: 0, grad: 0 };
  for (const s of all) groupMax[s.group] = Math.max(groupMax[s.group], s.refMax);
  const tensors: StreamVerdict["tensors"] = {};
  // every tensor of a sequence over its bound; the headline is the furthest over (kernel-judge.ts headline)
  const failing: Failing<never>[] = [];
  let anyLive = false;
  for (const s of all) {
    if (s.broken !== null) {
      failing.push({ message: s.broken, ratio: Infinity, where: `${s.name} (sequence ${s.seq})` });
      continue;
    }
    if (s.refMax > EXERCISED) anyLive = true;
    const floor = floorRel(p.accumulate) * Math.max(s.refMax, groupFloor(p.accumulate) * groupMax[s.group]);
    const bound = KERNEL.boundFactor.value * s.errRef + floor;
    const ratio = bound > 0 ? s.err / bound : s.err === 0 ? 0 : Infinity;
    const t = (tensors[s.name] ??= { err: 0, plain: 0, bound: 0, ratio: -1, slope: 0, sigma: 0, threshold: 0, bias: false });
    if (ratio > t.ratio) Object.assign(t, { err: s.err, plain: s.errRef, bound, ratio });
    if (!(Number.isFinite(s.errRef) && s.err <= bound)) {
      failing.push({
        message: `${s.name} (sequence ${s.seq}): max |kernel - ref64| = ${s.err.toExponential(3)} at [${s.at}] > 2 x ${s.errRef.toExponential(3)} (plain) + ${floor.toExponential(3)} (floor)`,
        ratio: Number.isFinite(s.errRef) ? ratio : Infinity, where: `${s.name} (sequence ${s.seq})`,
      });
    }
  }
  let biasFailure: string | undefined;
  for (const [name, t] of Object.entries(tensors)) {
    const mine = all.filter((s) => s.name === name && s.broken === null);
    const rr = sum(mine, "rr"), re = sum(mine, "re"), ee = sum(mine, "ee"), pp = sum(mine, "pp"), n = sum(mine, "n");
    const slope = rr > 0 && n >= 2 ? re / rr : 0;
    const sigma = rr > 0 && n >= 2 ? Math.sqrt(Math.max(0, ee - slope * re) / (n - 1) / rr) : Infinity;
    const plainTerm = rr > 0 ? (BIAS.plainFactor.value * Math.sqrt(pp)) / Math.sqrt(rr) : Infinity;
    const threshold = Math.max(BIAS_K * sigma, plainTerm, biasFloor(p));
    const live = Math.max(...mine.map((s) => s.refMax)) > EXERCISED;
    Object.assign(t, { slope, sigma, threshold, bias: !(Math.abs(slope) <= threshold) });
    if (t.bias && live) biasFailure ??= `${name}: systematic bias, slope ${slope.toExponential(3)} > ${threshold.toExponential(3)} (docs/spec/precision.md#bias)`;
  }
  const failure = headline(failing)?.message;
  if (failure !== undefined) return { ok: false, vacuous: false, message: failure, tensors, illConditioned };
  if (!anyLive) return { ok: false, vacuous: true, message: `every compared reference value is below ${EXERCISED}`, tensors, illConditioned };
  if (biasFailure !== undefined) return { ok: false, vacuous: false, message: biasFailure, tensors, illConditioned };
  return { ok: true, vacuous: false, tensors, illConditioned };
}

function sum(xs: readonly SeqSummary[], k: "rr" | "re" | "ee" | "pp" | "n"): number {
  let s = 0;
  for (const x of xs) s += x[k];
  return s;
}
