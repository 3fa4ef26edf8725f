/**
 * The judge's fast Delta and Gated Delta pairs (oracle/matrix-fast.ts, docs/spec/precision.md#fast-pair)
 * against the reference pairs they replace, bit for bit: y, the final state, every input gradient
 * and d(initial state), on random cases of several shapes (d not a power of two, odd d, T = 1),
 * f64 and f32 storage, f64 and f32 sums in the natural and the reversed order, with zero entries
 * (the reference skips zero terms) and with and without d(final state). Under random rounding the
 * fast pair hands over to the reference; that is checked too.
 */
import { expect, test } from "bun:test";
import { judgePair } from "../oracle/matrix-fast.ts";
import { withAccumulate, type AccumulateDType, type SumRounding } from "../src/precision.ts";
import { delta } from "../src/rules/delta.ts";
import { gated_delta } from "../src/rules/gated_delta.ts";
import { Rng } from "../src/rng.ts";
import type { InnerInputs, InnerPair, RuleDecl, State } from "../src/rules/types.ts";
import { Tensor, type DType } from "../src/tensor.ts";

interface Case {
  inp: InnerInputs;
  state: State;
  dy: Tensor;
  dFinal?: State;
  cfg: { d: number; seq_len: number };
}

function randomCase(rng: Rng, d: number, s: number, dtype: DType, zeros: boolean, withDFinal: boolean): Case {
  const t = (shape: number[], lo: number, hi: number) => {
    const x = new Tensor(dtype, shape);
    for (let i = 0; i < x.size; i++) x.data[i] = zeros && rng.next() < 0.15 ? 0 : rng.uniform(lo, hi);
    return x;
  };
  const sc = 1 / Math.sqrt(d);
  const inp = { k: t([s, d], -sc, sc), v: t([s, d], -1, 1), q: t([s, d], -sc, sc), alpha: t([s], 0, 0.9), theta: t([s], 0.05, 0.9) };
  const dy = t([s, d], -1, 1);
  if (zeros && s > 1) for (let i = 0; i < d; i++) dy.data[i] = 0; // a token with no upstream gradient
  return {
    inp: { ...inp, x: inp.k } as InnerInputs, state: { M: t([d, d], -sc, sc) }, dy,
    ...(withDFinal ? { dFinal: { M: t([d, d], -1, 1) } } : {}), cfg: { d, seq_len: s },
  };
}

function runPair(pair: InnerPair<string>, c: Case): Record<string, ArrayLike<number>> {
  const f = pair.forward(c.inp, c.state, c.cfg);
  const g = pair.backward(f.saved, c.inp, c.dy, c.cfg, c.dFinal);
  return {
    y: f.y.data, M: f.finalState.M!.data, dk: g.dk!.data, dv: g.dv!.data, dq: g.dq!.data,
    dalpha: g.dalpha!.data, dtheta: g.dtheta!.data, dM0: g.dState0!.M!.data,
  };
}

function firstDifference(a: Record<string, ArrayLike<number>>, b: Record<string, ArrayLike<number>>): string | null {
  for (const name of Object.keys(b)) {
    const x = a[name]!, y = b[name]!;
    if (x.length !== y.length) return `${name}: ${x.length} values, reference ${y.length}`;
    if (x.constructor !== y.constructor) return `${name}: ${x.constructor.name}, reference ${y.constructor.name}`;
    for (let i = 0; i < y.length; i++) if (!Object.is(x[i], y[i])) return `${name}[${i}] = ${x[i]}, reference ${y[i]}`;
  }
  return null;
}

const MODES: { acc: AccumulateDType; rounding: SumRounding }[] = [
  { acc: "f64", rounding: "natural" }, { acc: "f64", rounding: "reversed" },
  { acc: "f32", rounding: "natural" }, { acc: "f32", rounding: "reversed" }, { acc: "f32", rounding: { random: 3 } },
];
const SHAPES: [number, number][] = [[1, 1], [2, 3], [3, 1], [5, 7], [7, 4], [16, 9], [33, 5], [12, 20], [3, 70], [4, 64], [6, 33]];

for (const decl of [delta, gated_delta] as RuleDecl[]) {
  test(`${decl.key}: the fast pair equals the reference pair bitwise (forward, backward, state gradients)`, () => {
    const fast = judgePair(decl);
    expect(fast).not.toBe(decl.inner);
    const rng = new Rng(decl.key.length * 1000 + 17);
    let compared = 0;
    for (const [d, s] of SHAPES) {
      for (const dtype of ["f64", "f32"] as DType[]) {
        for (const { acc, rounding } of MODES) {
          for (const zeros of [false, true]) {
            const c = randomCase(rng, d, s, dtype, zeros, rng.next() < 0.7);
            const ref = withAccumulate(acc, () => runPair(decl.inner, c), rounding);
            const got = withAccumulate(acc, () => runPair(fast, c), rounding);
            const diff = firstDifference(got, ref);
            if (diff !== null) throw new Error(`${decl.key} d=${d} T=${s} ${dtype} ${acc}-sums ${JSON.stringify(rounding)}${zeros ? " with zeros" : ""}: ${diff}`);
            compared++;
          }
        }
      }
    }
    expect(compared).toBe(SHAPES.length * 2 * MODES.length * 2);
  });
}

test("the comparison can fail: a changed summation order is seen", () => {
  // the fast pair under f32 sums in the natural order against the reference reversed: not equal
  const rng = new Rng(5);
  const c = randomCase(rng, 16, 9, "f32", false, true);
  const ref = withAccumulate("f32", () => runPair(delta.inner, c), "reversed");
  const got = withAccumulate("f32", () => runPair(judgePair(delta), c), "natural");
  expect(firstDifference(got, ref)).not.toBeNull();
});
