/**
 * The child process of the C5 checks (kernel-checks.ts, "Process model"): native kernel code runs
 * only here, so a crash or a hang costs this process, not the suite. It holds the checks themselves:
 * batched cases, the flash-attention comparison, the race, block-size and tape checks.
 *
 *   bun conformance/kernel-child.ts --probe --backends cpu-emu,cuda
 *       builds (if needed) and loads each backend; prints one line "@@nlc-probe <json>"
 *   bun conformance/kernel-child.ts --backend cpu-emu --profile default  < request.json
 *       runs the requested checks (ChildRequest) with runCheck; prints "@@nlc-start <id>" before
 *       and "@@nlc-result <json CheckResult>" after each one, unbuffered
 */
import * as fc from "fast-check";
import { writeSync } from "node:fs";
import { parseArgs } from "node:util";
import { abiOf, symbolName, type KernelFn, type RuleAbi } from "../../ffi/abi.ts";
import { resolveBackend, type Resolved } from "../../ffi/backends.ts";
import { kernelInnerPair } from "../../ffi/kernel-pair.ts";
import type { Arrays, KernelLib, RulePair } from "../../ffi/lib.ts";
import { flashRule, type Worst } from "../../oracle/compare.ts";
import type { CaseOutcome, CheckDef, CheckResult, Profile } from "../../harness/check.ts";
import { runCheck } from "../../harness/run.ts";
import { RULES } from "../../src/rules/index.ts";
import { frozenForwardSaved, paramNames, ruleForward, ruleForwardSaved, usedParams } from "../../src/rules/level.ts";
import type { InnerInputs, RuleConfig, RuleDecl, State } from "../../src/rules/types.ts";
import { withTape } from "../../src/tape.ts";
import { Tensor, cast } from "../../src/tensor.ts";
import {
  EXERCISED, FLOOR_REL, RUNS, RUNS_E2E, RUNS_GPU_BLOCKS, TOLERANCE, TOL_BITWISE, childPlan, type ChildRequest, type PlanEntry,
} from "./checks.ts";
import { ALPHA_LEVELS, THETA_LEVELS, buildRuleCase, ruleCaseSpecArb, type RuleCaseSpec, type SizeLimits } from "../../cases/rule-case.ts";
import { maxAbs } from "../../src/numeric.ts";

// ── case generation ────────────────────────────────────────────────────────────────────────

interface SeqExtra {
  seed: number;
  alpha: keyof typeof ALPHA_LEVELS;
  theta: keyof typeof THETA_LEVELS;
  state: "init" | "random";
}

/** A batch: the base case plus up to two more sequences with their own seed, gates and state. */
interface KSpec {
  base: RuleCaseSpec;
  B: number;
  extra: SeqExtra[];
}

function sizesFor(profile: Profile): SizeLimits {
  return profile === "deep" ? { d: [1, 12], seq_len: [1, 8] } : { d: [1, 12], seq_len: [1, 6] };
}

function batchArb(decl: RuleDecl, frozen: boolean, profile: Profile): fc.Arbitrary<KSpec> {
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

interface Seq {
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

function concat(parts: ArrayLike<number>[]): Float32Array {
  const n = parts.reduce((s, p) => s + p.length, 0);
  const out = new Float32Array(n);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

function batchInputs(a: RuleAbi, seqs: Seq[]): Arrays {
  const out: Arrays = {};
  for (const n of a.inputs) out[n] = concat(seqs.map((s) => s.in32[n]!.data));
  return out;
}

function batchState(names: readonly string[], seqs: Seq[]): Arrays {
  const out: Arrays = {};
  for (const n of names) out[n] = concat(seqs.map((s) => s.st32[n]!.data));
  return out;
}

function slice(a: Float32Array, B: number, b: number): Float32Array {
  const n = a.length / B;
  return a.subarray(b * n, (b + 1) * n);
}

// ── the flash-attention comparison ─────────────────────────────────────────────────────────

interface Compared {
  name: string;
  seq: number;
  kernel: ArrayLike<number> | undefined;
  ref64: ArrayLike<number>;
  ref32: ArrayLike<number>;
}


/** Applies the flash-attention bound to every item; records which tensors were exercised. */
function flashCompare(items: Compared[], exercised: Set<string>, who: string): CaseOutcome {
  let worst: Worst | undefined;
  let worstRatio = -1;
  let failure: string | undefined;
  let anyLive = false;
  for (const it of items) {
    const where = `${it.name}${it.seq > 0 || items.some((x) => x.seq > 0) ? ` (sequence ${it.seq})` : ""}`;
    if (it.kernel === undefined) {
      failure ??= `${who} does not return ${it.name}, which the reference computes`;
      continue;
    }
    if (it.kernel.length !== it.ref64.length) {
      failure ??= `${where}: kernel gave ${it.kernel.length} values, reference ${it.ref64.length}`;
      continue;
    }
    const mag = maxAbs(it.ref64);
    if (mag > EXERCISED) {
      exercised.add(it.name);
      anyLive = true;
    }
    const k = flashRule(it.kernel, it.ref64, it.ref32, FLOOR_REL * mag);
    const bound = k.bound;
    const ratio = bound > 0 ? k.err / bound : k.err === 0 ? 0 : Infinity;
    if (ratio > worstRatio) {
      worstRatio = ratio;
      const ref = it.ref64[k.at]!;
      worst = { abs: k.err, rel: k.err / Math.max(Math.abs(ref), 1e-300), tensor: `${it.name}[seq ${it.seq}]`, index: k.at };
    }
    if (!k.ok && failure === undefined) {
      failure = `${where}: max |kernel - ref64| = ${k.err.toExponential(3)} at [${k.at}] (kernel ${it.kernel[k.at]}, ref64 ${it.ref64[k.at]}) ` +
        `> 2 x ${k.errRef.toExponential(3)} (f32 reference) + ${(FLOOR_REL * mag).toExponential(3)} (floor)`;
    }
  }
  if (failure !== undefined) return { ok: false, worst, message: failure };
  if (!anyLive) return { ok: false, vacuous: true, worst, message: `every compared reference value is below ${EXERCISED}` };
  return { ok: true, worst };
}

// ── the checks themselves (run in the child) ───────────────────────────────────────────────

function requirePair(lib: KernelLib, rule: string): RulePair {
  const p = lib.pair(rule);
  if (typeof p === "string") throw new Error(p);
  return p;
}

function zerosLike(a: ArrayLike<number>): Float64Array {
  return new Float64Array(a.length);
}

function forwardCase(decl: RuleDecl, frozen: boolean, lib: KernelLib, k: KSpec, exercised: Set<string>): CaseOutcome {
  const pair = requirePair(lib, decl.key);
  const seqs = specsOf(k).map((s) => sequence(decl, s, frozen));
  const cfg = seqs[0]!.cfg, B = seqs.length;
  const items: Compared[] = [];
  if (frozen) {
    const fz = pair.frozen, ref = decl.frozen!;
    if (fz === null) return { ok: false, message: `no frozen kernel pair for ${decl.key}` };
    const y = fz.forward(cfg, B, concat(seqs.map((s) => s.in32.q.data)), batchState(pair.abi.frozen!.state, seqs)).y;
    seqs.forEach((s, b) => items.push({
      name: "y", seq: b, kernel: slice(y, B, b),
      ref64: ref.forward(s.in64.q, s.st64, cfg).y.data, ref32: ref.forward(s.in32.q, s.st32, cfg).y.data,
    }));
    return flashCompare(items, exercised, symbolName(decl.key, "frozen_forward"));
  }
  const r = pair.forward(cfg, B, batchInputs(pair.abi, seqs), batchState(pair.abi.state, seqs));
  seqs.forEach((s, b) => {
    const r64 = decl.inner.forward(s.in64, s.st64, cfg), r32 = decl.inner.forward(s.in32, s.st32, cfg);
    items.push({ name: "y", seq: b, kernel: slice(r.y, B, b), ref64: r64.y.data, ref32: r32.y.data });
    for (const n of Object.keys(r64.finalState)) {
      const kst = r.state[n];
      items.push({ name: `state ${n}`, seq: b, kernel: kst && slice(kst, B, b), ref64: r64.finalState[n]!.data, ref32: r32.finalState[n]!.data });
    }
  });
  return flashCompare(items, exercised, symbolName(decl.key, "forward"));
}

function backwardCase(decl: RuleDecl, frozen: boolean, lib: KernelLib, k: KSpec, exercised: Set<string>): CaseOutcome {
  const pair = requirePair(lib, decl.key);
  const seqs = specsOf(k).map((s) => sequence(decl, s, frozen));
  const cfg = seqs[0]!.cfg, B = seqs.length;
  const dy = concat(seqs.map((s) => s.dy32.data));
  const items: Compared[] = [];
  if (frozen) {
    const fz = pair.frozen, ref = decl.frozen!;
    if (fz === null) return { ok: false, message: `no frozen kernel pair for ${decl.key}` };
    const q = concat(seqs.map((s) => s.in32.q.data)), st = batchState(pair.abi.frozen!.state, seqs);
    const f = fz.forward(cfg, B, q, st);
    const dq = fz.backward(cfg, B, q, st, f.saved, dy);
    seqs.forEach((s, b) => {
      const r64 = ref.forward(s.in64.q, s.st64, cfg), r32 = ref.forward(s.in32.q, s.st32, cfg);
      items.push({
        name: "dq", seq: b, kernel: slice(dq, B, b),
        ref64: ref.backward(r64.saved, s.in64.q, s.dy64, cfg).dq.data, ref32: ref.backward(r32.saved, s.in32.q, s.dy32, cfg).dq.data,
      });
    });
    return flashCompare(items, exercised, symbolName(decl.key, "frozen_backward"));
  }
  const inputs = batchInputs(pair.abi, seqs);
  const f = pair.forward(cfg, B, inputs, batchState(pair.abi.state, seqs));
  const g = pair.backward(cfg, B, inputs, f.saved, dy);
  seqs.forEach((s, b) => {
    const r64 = decl.inner.forward(s.in64, s.st64, cfg), r32 = decl.inner.forward(s.in32, s.st32, cfg);
    const g64 = decl.inner.backward(r64.saved, s.in64, s.dy64, cfg) as Record<string, Tensor | undefined>;
    const g32 = decl.inner.backward(r32.saved, s.in32, s.dy32, cfg) as Record<string, Tensor | undefined>;
    const names = new Set<string>([...pair.abi.grads, ...Object.keys(g64).filter((n) => g64[n] !== undefined)]);
    for (const n of names) {
      const ref64 = g64[n]?.data, ref32 = g32[n]?.data, kern = g[n];
      const shapeSrc = ref64 ?? (kern && slice(kern, B, b))!;
      items.push({
        name: n, seq: b, kernel: kern && slice(kern, B, b),
        // absent in the reference = zero (InnerGrads)
        ref64: ref64 ?? zerosLike(shapeSrc), ref32: ref32 ?? zerosLike(shapeSrc),
      });
    }
  });
  return flashCompare(items, exercised, symbolName(decl.key, "backward"));
}

/** Every output of every kernel of the variant, keyed `<symbol> <output>`. */
function runAllKernels(decl: RuleDecl, frozen: boolean, pair: RulePair, k: KSpec): Record<string, Float32Array> {
  const seqs = specsOf(k).map((s) => sequence(decl, s, frozen));
  const cfg = seqs[0]!.cfg, B = seqs.length;
  const dy = concat(seqs.map((s) => s.dy32.data));
  const out: Record<string, Float32Array> = {};
  const put = (fn: KernelFn, rec: Arrays) => {
    for (const [n, a] of Object.entries(rec)) out[`${symbolName(decl.key, fn)} ${n}`] = a;
  };
  if (frozen) {
    const fz = pair.frozen!;
    const q = concat(seqs.map((s) => s.in32.q.data)), st = batchState(pair.abi.frozen!.state, seqs);
    const f = fz.forward(cfg, B, q, st);
    put("frozen_forward", { y: f.y, ...f.saved });
    put("frozen_backward", { dq: fz.backward(cfg, B, q, st, f.saved, dy) });
  } else {
    const inputs = batchInputs(pair.abi, seqs);
    const f = pair.forward(cfg, B, inputs, batchState(pair.abi.state, seqs));
    put("forward", { y: f.y, ...f.state, ...f.saved });
    put("backward", pair.backward(cfg, B, inputs, f.saved, dy));
  }
  return out;
}

/** Index of the first element whose bits differ, or -1. */
function firstBitDiff(a: Float32Array, b: Float32Array): number {
  if (a.length !== b.length) return 0;
  const ua = new Uint32Array(a.buffer, a.byteOffset, a.length), ub = new Uint32Array(b.buffer, b.byteOffset, b.length);
  for (let i = 0; i < ua.length; i++) if (ua[i] !== ub[i]) return i;
  return -1;
}

function compareRuns(a: Record<string, Float32Array>, b: Record<string, Float32Array>, what: string): CaseOutcome {
  for (const key of Object.keys(a)) {
    const i = firstBitDiff(a[key]!, b[key]!);
    if (i >= 0) {
      const [sym, name] = key.split(" ");
      return { ok: false, message: `${sym}: output ${name}[${i}] differs ${what}: ${a[key]![i]} vs ${b[key]![i]} — a race between threads of a block` };
    }
  }
  return { ok: true };
}

function raceCase(decl: RuleDecl, frozen: boolean, lib: KernelLib, k: KSpec): CaseOutcome {
  const pair = requirePair(lib, decl.key);
  const emu = lib.emu!;
  try {
    emu.setOrder(false);
    const fwd = runAllKernels(decl, frozen, pair, k);
    emu.setOrder(true);
    const rev = runAllKernels(decl, frozen, pair, k);
    return compareRuns(fwd, rev, "between thread order 0..n-1 and n-1..0");
  } finally {
    emu.setOrder(false);
  }
}

interface TapeRun {
  y: Tensor;
  grads: Record<string, Tensor | null>;
}

function tapeRun(decl: RuleDecl, c: { X: Tensor; params: Record<string, Tensor>; state: State; dy: Tensor; cfg: RuleConfig },
  inner: RuleDecl["inner"]): TapeRun {
  return withTape((tape) => {
    const X = tape.input(c.X);
    const params: Record<string, Tensor> = {};
    for (const n of paramNames(decl)) params[n] = tape.param(c.params[n]!);
    const y = ruleForward(decl, X, params, c.state, c.cfg, inner).y;
    if (tape.length !== 1) throw new Error(`expected the rule as ONE opaque block on the tape, found ${tape.length} entries`);
    tape.backward(y, c.dy);
    const grads: Record<string, Tensor | null> = { X: tape.grad(X) };
    for (const n of usedParams(decl)) grads[n] = tape.grad(params[n]!);
    return { y, grads };
  });
}

function e2eCase(decl: RuleDecl, lib: KernelLib, spec: RuleCaseSpec, exercised: Set<string>): CaseOutcome {
  const pair = requirePair(lib, decl.key);
  const c32 = buildRuleCase(decl, spec, "f32");
  const to64 = (rec: Record<string, Tensor>) => Object.fromEntries(Object.entries(rec).map(([n, t]) => [n, cast(t, "f64")]));
  const c64 = { ...c32, X: cast(c32.X, "f64"), params: to64(c32.params), state: to64(c32.state), dy: cast(c32.dy, "f64") };
  const kern = tapeRun(decl, c32, kernelInnerPair(decl, pair));
  const r64 = tapeRun(decl, c64, decl.inner), r32 = tapeRun(decl, c32, decl.inner);
  const items: Compared[] = [{ name: "y", seq: 0, kernel: kern.y.data, ref64: r64.y.data, ref32: r32.y.data }];
  for (const n of Object.keys(r64.grads)) {
    const g64 = r64.grads[n], g32 = r32.grads[n], gk = kern.grads[n];
    if (g64 === null || g64 === undefined) return { ok: false, message: `no reference gradient reached ${n}` };
    items.push({ name: `grad ${n}`, seq: 0, kernel: gk?.data, ref64: g64.data, ref32: g32?.data ?? zerosLike(g64.data) });
  }
  return flashCompare(items, exercised, `rule '${decl.key}' with the ${lib.backend} kernel as its inner loop`);
}

function expectedTensors(e: PlanEntry, a: RuleAbi | undefined): string[] {
  const decl = e.decl!;
  if (e.kind === "forward") return e.frozen ? ["y"] : ["y", ...Object.keys(decl.stateShapes({ d: 2, seq_len: 1, ...defaultsOf(decl) })).map((n) => `state ${n}`)];
  if (e.kind === "backward") return e.frozen ? ["dq"] : [...(a?.grads ?? [])];
  return ["y", "grad X", ...usedParams(decl).map((n) => `grad ${n}`)];
}

function defaultsOf(decl: RuleDecl): Record<string, number | string> {
  return Object.fromEntries(Object.entries(decl.hyper).map(([n, h]) => [n, h.default]));
}

/** The real definitions, for the child. `lib` is the backend's library; `testLib` the cpu-test build. */
function childCheck(e: PlanEntry, lib: KernelLib, profile: Profile, testLib: () => KernelLib): { def: CheckDef<any>; after?: (r: CheckResult) => CheckResult } {
  const base = { id: e.id, class: "C5" as const, subject: e.subject, spec: e.spec };
  const missing = e.decl === undefined ? null : lib.pair(e.decl.key);
  if (typeof missing === "string") {
    // a rule without a kernel pair fails once, with the reason, instead of once per generated case
    return { def: { ...base, tolerance: { kind: "presence" }, run: () => ({ ok: false, message: missing }) } };
  }
  if (e.frozen === true && typeof missing === "object" && missing?.frozen === null) {
    return { def: { ...base, tolerance: { kind: "presence" }, run: () => ({ ok: false, message: `no frozen kernel pair for ${e.decl!.key} in ${lib.path}` }) } };
  }
  switch (e.kind) {
    case "forward":
    case "backward": {
      const decl = e.decl!, frozen = e.frozen!;
      const exercised = new Set<string>();
      const run = e.kind === "forward" ? forwardCase : backwardCase;
      const def: CheckDef<KSpec> = {
        ...base, tolerance: TOLERANCE, runs: RUNS, arb: batchArb(decl, frozen, profile),
        run: (k) => run(decl, frozen, lib, k, exercised),
      };
      return { def, after: (r) => coverage(r, expectedTensors(e, abiOf(decl.key)), exercised) };
    }
    case "gpu-blocks": {
      const decl = e.decl!, frozen = e.frozen!;
      const exercised = new Set<string>();
      const run = (k: KSpec): CaseOutcome => {
        lib.emu!.setGpuBlocks(true);
        try {
          const f = forwardCase(decl, frozen, lib, k, exercised);
          return f.ok ? backwardCase(decl, frozen, lib, k, exercised) : f;
        } finally {
          lib.emu!.setGpuBlocks(false);
        }
      };
      const expected = [...expectedTensors({ ...e, kind: "forward" }, abiOf(decl.key)), ...expectedTensors({ ...e, kind: "backward" }, abiOf(decl.key))];
      return { def: { ...base, tolerance: TOLERANCE, runs: RUNS_GPU_BLOCKS, arb: batchArb(decl, frozen, profile), run }, after: (r) => coverage(r, expected, exercised) };
    }
    case "race": {
      const decl = e.decl!, frozen = e.frozen!;
      return { def: { ...base, tolerance: TOL_BITWISE, runs: RUNS, arb: batchArb(decl, frozen, profile), run: (k: KSpec) => raceCase(decl, frozen, lib, k) } };
    }
    case "tape-e2e": {
      const decl = e.decl!;
      const exercised = new Set<string>();
      const def: CheckDef<RuleCaseSpec> = {
        ...base, tolerance: TOLERANCE, runs: RUNS_E2E, arb: ruleCaseSpecArb(decl, sizesFor(profile)),
        run: (spec) => e2eCase(decl, lib, spec, exercised),
      };
      return { def, after: (r) => coverage(r, expectedTensors(e, undefined), exercised) };
    }
    case "emu-race-detector":
      return { def: { ...base, tolerance: TOL_BITWISE, run: () => raceDetector(testLib()) } };
    case "emu-sync":
      return { def: { ...base, tolerance: { kind: "status" }, run: () => syncMisuse(testLib()) } };
    case "emu-thread-mode":
      return { def: { ...base, tolerance: TOL_BITWISE, runs: { quick: 2, default: 3, deep: 20 }, arb: batchArb(RULES.find((r) => r.key === "delta")!, false, profile), run: (k: KSpec) => threadMode(lib, k) } };
    case "planted":
      return {
        def: {
          ...base, tolerance: { kind: "crash" },
          run: () => {
            const st = testLib().raw.nlk_test_crash!(e.mode!);
            return { ok: false, message: `the planted fault did not take the process down (status ${st})` };
          },
        },
      };
  }
}

/** A passing check in which some compared tensor never carried a non-trivial reference value is vacuous. */
function coverage(r: CheckResult, expected: string[], exercised: Set<string>): CheckResult {
  if (r.status !== "pass") return r;
  const never = expected.filter((n) => !exercised.has(n));
  if (never.length === 0) return r;
  return { ...r, status: "vacuous", message: `never exercised in ${r.runs} cases (|ref64| <= ${EXERCISED} throughout): ${never.join(", ")}` };
}

function raceDetector(t: KernelLib): CaseOutcome {
  const emu = t.emu!, race = t.raw.nlk_test_race!;
  const n = 8;
  const a = new Float32Array(n), b = new Float32Array(n);
  try {
    emu.setOrder(false);
    const s1 = race(n, a);
    emu.setOrder(true);
    const s2 = race(n, b);
    if (s1 !== 0 || s2 !== 0) return { ok: false, message: `nlk_test_race returned ${s1}, ${s2}` };
  } finally {
    emu.setOrder(false);
  }
  const r = compareRuns({ "nlk_test_race out": a }, { "nlk_test_race out": b }, "between thread orders");
  return r.ok ? { ok: false, message: "the planted race (a missing __syncthreads) gave identical bits in both thread orders: the race check is blind" }
    : { ok: true, message: r.message };
}

function syncMisuse(t: KernelLib): CaseOutcome {
  const emu = t.emu!, div = t.raw.nlk_test_divergent_sync!;
  for (const threads of [false, true]) {
    emu.setMode(threads);
    try {
      const mode = threads ? "thread mode" : "fiber mode";
      const s0 = div(0);
      const d0 = emu.errorDetail();
      if (s0 !== -20) return { ok: false, message: `${mode}: divergent __syncthreads() returned ${s0}, expected -20 (NLK_ERR_EMU_SYNC_DIVERGENT)` };
      if (!/test_kernels\.cu:\d+.*test_kernels\.cu:\d+/.test(d0)) return { ok: false, message: `${mode}: the detail does not name both call sites: '${d0}'` };
      const s1 = div(1);
      if (s1 !== -21) return { ok: false, message: `${mode}: __syncthreads() after a return gave ${s1}, expected -21 (NLK_ERR_EMU_SYNC_EXITED)` };
    } finally {
      emu.setMode(false);
    }
  }
  return { ok: true };
}

function threadMode(lib: KernelLib, k: KSpec): CaseOutcome {
  const decl = RULES.find((r) => r.key === "delta")!;
  const pair = requirePair(lib, decl.key);
  const fib = runAllKernels(decl, false, pair, k);
  lib.emu!.setMode(true);
  try {
    return compareRuns(fib, runAllKernels(decl, false, pair, k), "between fiber mode and thread mode");
  } finally {
    lib.emu!.setMode(false);
  }
}


// ── the process ────────────────────────────────────────────────────────────────────────────

function emit(line: string): void {
  writeSync(1, `${line}\n`);
}

const log = (s: string) => writeSync(2, `${s}\n`);

async function probe(names: string[]): Promise<void> {
  const out: Omit<Resolved, "lib">[] = [];
  for (const n of names) {
    const r = await resolveBackend(n, log);
    out.push({ info: r.info, problem: r.problem });
  }
  emit(`@@nlc-probe ${JSON.stringify(out)}`);
}

function stub(id: string, status: CheckResult["status"], message: string, seed = 0): CheckResult {
  return { id, class: "C5", subject: {}, status, tolerance: {}, runs: 0, seed, path: "", replay: "", ms: 0, spec: "", message };
}

async function run(backend: string, profile: Profile, req: ChildRequest): Promise<void> {
  const resolved = await resolveBackend(backend, log);
  if (resolved.lib === undefined) {
    const status = resolved.problem === "unavailable" ? "skip" : "error";
    for (const c of req.checks) emit(`@@nlc-result ${JSON.stringify(stub(c.id, status, resolved.info.reason ?? "unavailable"))}`);
    return;
  }
  const lib = resolved.lib;
  const plan = childPlan(backend, req.plant);
  const needsTest = req.checks.some((c) => { const k = plan.get(c.id)?.kind; return k === "planted" || k === "emu-race-detector" || k === "emu-sync"; });
  let testLib: KernelLib | undefined;
  if (needsTest) {
    const t = await resolveBackend("cpu-test", log);
    if (t.lib === undefined) throw new Error(`the cpu-test library is not usable: ${t.info.reason}`);
    testLib = t.lib;
  }
  for (const c of req.checks) {
    const entry = plan.get(c.id);
    emit(`@@nlc-start ${c.id}`);
    if (entry === undefined) {
      emit(`@@nlc-result ${JSON.stringify(stub(c.id, "error", `no C5 check '${c.id}' on backend ${backend}`))}`);
      continue;
    }
    const { def, after } = childCheck(entry, lib, profile, () => testLib!);
    let r = req.runSeed !== undefined
      ? runCheck(def, { seed: req.runSeed, profile })
      : runCheck(def, { seed: 0, profile, replay: { seed: c.seed ?? 0, path: c.path ?? "" } });
    if (after !== undefined) r = after(r);
    emit(`@@nlc-result ${JSON.stringify(r)}`);
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    args: process.argv.slice(2),
    options: { probe: { type: "boolean" }, backends: { type: "string" }, backend: { type: "string" }, profile: { type: "string" } },
  });
  if (values.probe) {
    await probe((values.backends ?? "").split(",").filter((s) => s !== ""));
    return;
  }
  if (values.backend === undefined) throw new Error("kernel-child: --backend or --probe is required");
  const req = JSON.parse(await Bun.stdin.text()) as ChildRequest;
  await run(values.backend, (values.profile ?? "default") as Profile, req);
}

await main();
