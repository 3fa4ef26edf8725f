/**
 * Judging a kernel case (docs/spec/fixtures.md#kernel-cases) the way C5 judges a kernel it runs
 * itself (docs/spec/precision.md): per (b, h) sequence, ref64 and the plain reference at the
 * fixture's declared precision run on the fixture's inputs; every expected tensor must lie within
 * 2 · max|plain − ref64| + floor of ref64 (the floor per accumulate dtype) and pass the bias test.
 * The fixture's values are the kernel's: where they came from (another language, a GPU, a bf16
 * kernel) does not matter.
 */
import type { CaseOutcome } from "../../harness/check.ts";
import type { KernelFixture, KernelTensor } from "../../cases/fixtures/kernel-load.ts";
import { kernelGradNames, tokenShape } from "../../cases/fixtures/kernel-load.ts";
import { plainYardstick, runPlain, runRef64, type PairCase, type PairRun } from "../../oracle/plain-reference.ts";
import type { InnerInputs, State } from "../../src/rules/types.ts";
import { Tensor } from "../../src/tensor.ts";
import { flashCompare, type Compared } from "../c5/compare.ts";

/** Sequence n = b·H + h of an ABI per-token tensor [B, T, H, w] as [T, w] (gates: [T]). */
export function tokenSeq(t: KernelTensor, n: number, H: number): Float64Array {
  const [, T, , w = 1] = t.shape as number[];
  const b = Math.floor(n / H), h = n % H;
  const out = new Float64Array(T! * w);
  for (let i = 0; i < T!; i++) for (let j = 0; j < w; j++) out[i * w + j] = t.data[((b * T! + i) * H + h) * w + j]!;
  return out;
}

/** Sequence n's block of an ABI state tensor [B, H, ...] (contiguous per sequence). */
export function stateSeq(t: KernelTensor, n: number, B: number, H: number): Float64Array {
  const per = t.data.length / (B * H);
  return t.data.slice(n * per, (n + 1) * per);
}

/** The reference's case for sequence n: inputs [T, d] / [T], the state, dy and d(final state) (absent = zero). */
export function pairCaseOf(fx: KernelFixture, n: number): PairCase {
  const { d, seq_len: T } = fx.cfg;
  const inputs: Record<string, Tensor> = {};
  for (const [name, t] of Object.entries(fx.inputs)) {
    inputs[name] = new Tensor("f64", t.shape.length === 3 ? [T] : [T, d], tokenSeq(t, n, fx.H));
  }
  // The reference pair's inputs always carry x; only Trellis reads it, and it is in Trellis' ABI.
  if (!fx.frozen && inputs.x === undefined) inputs.x = new Tensor("f64", [T, d]);
  const shapes = fx.decl.stateShapes(fx.cfg);
  const state: Record<string, Tensor> = {};
  for (const [name, t] of Object.entries(fx.state)) state[name] = new Tensor("f64", shapes[name]!, stateSeq(t, n, fx.B, fx.H));
  const dy = fx.dy === null ? new Tensor("f64", [T, d]) : new Tensor("f64", [T, d], tokenSeq(fx.dy, n, fx.H));
  let dFinal: State | undefined;
  if (!fx.frozen && Object.keys(fx.dstate).length > 0) {
    const rec: Record<string, Tensor> = {};
    for (const name of fx.abi.state) {
      const t = fx.dstate[name];
      rec[name] = t === undefined ? new Tensor("f64", shapes[name]!) : new Tensor("f64", shapes[name]!, stateSeq(t, n, fx.B, fx.H));
    }
    dFinal = rec;
  }
  return { inputs: inputs as unknown as InnerInputs, state, dy, ...(dFinal ? { dFinal } : {}) };
}

/**
 * A run's tensors under the fixture's names: y, `state <name>`, the input gradients, d<state>_0
 * (frozen: d<state>). A gradient the reference leaves absent is zero by the math (a frozen Titans
 * read ignores its momentum S).
 */
export function namedRun(fx: Pick<KernelFixture, "abi" | "frozen" | "decl" | "cfg">, r: PairRun): Map<string, ArrayLike<number>> {
  const { d, seq_len: T } = fx.cfg;
  const shapes = fx.decl.stateShapes(fx.cfg);
  const out = new Map<string, ArrayLike<number>>();
  out.set("y", r.y);
  for (const name of fx.abi.state) if (r.finalState[name] !== undefined) out.set(`state ${name}`, r.finalState[name]!);
  const g = kernelGradNames(fx.abi, fx.frozen);
  for (const name of g.tokens) out.set(name, r.grads[name] ?? new Float64Array(tokenShape(name, 1, T, 1, d).reduce((a, b) => a * b, 1)));
  fx.abi.state.forEach((s, i) => {
    out.set(g.states[i]!, r.grads[`dState0.${s}`] ?? new Float64Array(shapes[s]!.reduce((a, b) => a * b, 1)));
  });
  return out;
}

/** The fixture's expected tensors of sequence n under the same names. */
function expectedOf(fx: KernelFixture, n: number): Map<string, Float64Array> {
  const out = new Map<string, Float64Array>();
  const e = fx.expected;
  if (e.y !== undefined) out.set("y", tokenSeq(e.y, n, fx.H));
  for (const [name, t] of Object.entries(e.state ?? {})) out.set(`state ${name}`, stateSeq(t, n, fx.B, fx.H));
  const g = kernelGradNames(fx.abi, fx.frozen);
  for (const [name, t] of Object.entries(e.grads ?? {})) out.set(name, g.tokens.includes(name) ? tokenSeq(t, n, fx.H) : stateSeq(t, n, fx.B, fx.H));
  return out;
}

export function replayKernelFixture(fx: KernelFixture): CaseOutcome {
  const items: Compared[] = [];
  for (let n = 0; n < fx.B * fx.H; n++) {
    const want = expectedOf(fx, n);
    if (want.size === 0) break;
    const c = pairCaseOf(fx, n);
    const r64 = namedRun(fx, runRef64(fx.decl, fx.frozen, c, fx.cfg));
    const plain = new Map(Object.entries(plainYardstick(fx.precision.accumulate, Object.fromEntries(r64),
      (order) => Object.fromEntries(namedRun(fx, runPlain(fx.decl, fx.frozen, c, fx.cfg, fx.precision, order))))));
    for (const [name, kernel] of want) {
      // the loader admits only names of the rule's ABI, and namedRun gives every one of them
      items.push({ name, seq: n, kernel, ref64: r64.get(name)!, ref32: plain.get(name)! });
    }
  }
  if (items.length === 0) return { ok: false, vacuous: true, message: "the fixture has no expected values" };
  const exercised = new Set<string>();
  const p = fx.precision;
  const r = flashCompare(items, exercised, `the kernel of ${fx.id} (${p.storage}/${p.state}/${p.accumulate})`, p);
  if (!r.ok) return r;
  const names = [...new Set(items.map((i) => i.name))];
  const never = names.filter((x) => !exercised.has(x));
  return {
    ...r,
    message: `${names.length} tensors over ${fx.B * fx.H} sequences within the ${p.storage}/${p.state}/${p.accumulate} bound, no bias` +
      (never.length > 0 ? `; never above the vacuity floor: ${never.join(", ")}` : ""),
  };
}
