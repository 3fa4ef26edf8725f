/**
 * The judge's fast KDA, Comba, DPLR, Gated DeltaProduct (n_h = 1, 2, 3), Hebbian, GLA, RWKV-6, GDN2 and gated Oja pairs (oracle/fast-pairs/,
 * docs/spec/precision.md#fast-pair-new-rules) against the reference pairs they replace, bit for
 * bit: y, the final state, every input gradient and d(initial state), on random cases of several
 * shapes (d not a power of two, odd d, T = 1, T across the checkpoint interval), f64 and f32
 * storage, f64 and f32 sums in the natural and the reversed order, with zero entries (the reference
 * skips zero terms) and with and without d(final state); under random rounding and TF32 products the
 * fast pair hands over to the reference, which is checked too. Seeds: the SEEDS list below.
 * Planted: a copy of each fast pair with one term wrong fails the same comparison; the TF32 mode
 * fails KDA's, Comba's and DPLR's pairs handing over under TF32 only when they have steps (as they did).
 */
import { expect, test } from "bun:test";
import { CHECKPOINT_EVERY, hasFastPair, judgePair } from "../oracle/matrix-fast.ts";
import { COMBA_FORM } from "../oracle/fast-pairs/comba.ts";
import { DPLR_FORM } from "../oracle/fast-pairs/dplr.ts";
import { GDP_FORM } from "../oracle/fast-pairs/gated-delta-product.ts";
import { GATED_OJA_FORM } from "../oracle/fast-pairs/gated-oja.ts";
import { GDN2_FORM } from "../oracle/fast-pairs/gdn2.ts";
import { GLA_FORM } from "../oracle/fast-pairs/gla.ts";
import { HEBBIAN_FORM } from "../oracle/fast-pairs/hebbian.ts";
import { KDA_FORM } from "../oracle/fast-pairs/kda.ts";
import { RWKV6_FORM } from "../oracle/fast-pairs/rwkv6.ts";
import { CHECKPOINT_EVERY_AUX, auxFastPair, type FastForm } from "../oracle/fast-pairs/skeleton.ts";
import { withAccumulate, type AccumulateDType, type SumRounding } from "../src/precision.ts";
import { comba } from "../src/rules/comba.ts";
import { dplr } from "../src/rules/dplr.ts";
import { gated_delta_product } from "../src/rules/gated_delta_product.ts";
import { gated_oja } from "../src/rules/gated_oja.ts";
import { gdn2 } from "../src/rules/gdn2.ts";
import { gla } from "../src/rules/gla.ts";
import { hebbian } from "../src/rules/hebbian.ts";
import { kda } from "../src/rules/kda.ts";
import { rwkv6 } from "../src/rules/rwkv6.ts";
import { Rng } from "../src/rng.ts";
import { gateShape, type InnerInputs, type InnerPair, type RuleDecl, type State } from "../src/rules/types.ts";
import { Tensor, type DType } from "../src/tensor.ts";

interface Case {
  inp: InnerInputs;
  state: State;
  dy: Tensor;
  dFinal?: State;
  cfg: { d: number; seq_len: number; n_h?: number };
}

/** A random case of the rule's pair: its gates (per token or per key channel) and auxiliary inputs as declared. */
function randomCase(decl: RuleDecl, rng: Rng, d: number, s: number, dtype: DType, zeros: boolean, withDFinal: boolean, nh = 1): Case {
  // a rule with several rows per token (tokenRows: Gated DeltaProduct's k, v, θ) gets n_h of them
  const rows = (n: string) => ((decl.tokenRows?.inputs as readonly string[] | undefined)?.includes(n) ? nh : 1);
  const t = (shape: number[], lo: number, hi: number) => {
    const x = new Tensor(dtype, shape);
    for (let i = 0; i < x.size; i++) x.data[i] = zeros && rng.next() < 0.15 ? 0 : rng.uniform(lo, hi);
    return x;
  };
  const sc = 1 / Math.sqrt(d);
  const inp: Record<string, Tensor> = { k: t([s, rows("k") * d], -sc, sc), v: t([s, rows("v") * d], -1, 1), q: t([s, d], -sc, sc) };
  for (const n of decl.auxInputs ?? []) inp[n] = t([s, d], -sc, sc);
  for (const g of decl.gates) {
    const shape = gateShape(decl, g) === "channel" ? [s, d] : rows(g) > 1 ? [s, rows(g)] : [s];
    inp[g] = g === "alpha" ? t(shape, 0, 0.9) : t(shape, 0.05, 0.9);
  }
  const dy = t([s, d], -1, 1);
  if (zeros && s > 1) for (let i = 0; i < d; i++) dy.data[i] = 0; // a token with no upstream gradient
  return {
    inp: { ...inp, x: inp.k } as unknown as InnerInputs, state: { M: t([d, d], -sc, sc) }, dy,
    ...(withDFinal ? { dFinal: { M: t([d, d], -1, 1) } } : {}), cfg: decl.tokenRows !== undefined ? { d, seq_len: s, n_h: nh } : { d, seq_len: s },
  };
}

function runPair(pair: InnerPair<string>, c: Case): Record<string, ArrayLike<number>> {
  const f = pair.forward(c.inp, c.state, c.cfg);
  const g = pair.backward(f.saved, c.inp, c.dy, c.cfg, c.dFinal);
  const out: Record<string, ArrayLike<number>> = { y: f.y.data, M: f.finalState.M!.data, dM0: g.dState0!.M!.data };
  for (const [n, x] of Object.entries(g)) if (x instanceof Tensor) out[n] = x.data;
  return out;
}

function firstDifference(a: Record<string, ArrayLike<number>>, b: Record<string, ArrayLike<number>>): string | null {
  const names = Object.keys(b);
  if (Object.keys(a).length !== names.length) return `outputs ${Object.keys(a).sort().join(",")}, reference ${names.sort().join(",")}`;
  for (const name of names) {
    const x = a[name], y = b[name]!;
    if (x === undefined) return `${name} missing`;
    if (x.length !== y.length) return `${name}: ${x.length} values, reference ${y.length}`;
    if (x.constructor !== y.constructor) return `${name}: ${x.constructor.name}, reference ${y.constructor.name}`;
    for (let i = 0; i < y.length; i++) if (!Object.is(x[i], y[i])) return `${name}[${i}] = ${x[i]}, reference ${y[i]}`;
  }
  return null;
}

const MODES: { acc: AccumulateDType; rounding: SumRounding }[] = [
  { acc: "f64", rounding: "natural" }, { acc: "f64", rounding: "reversed" },
  { acc: "f32", rounding: "natural" }, { acc: "f32", rounding: "reversed" }, { acc: "f32", rounding: { random: 3 } },
  // TF32 products (the TF32 yardstick, docs/spec/precision.md#tf32): the fast pair hands over too
  { acc: "tf32", rounding: "natural" },
];
const SHAPES: [number, number][] = [[1, 1], [2, 3], [3, 1], [5, 7], [7, 4], [16, 9], [33, 5], [12, 20], [3, 70], [4, 64], [6, 33]];
const RULES: [RuleDecl, FastForm][] = [[kda, KDA_FORM], [comba, COMBA_FORM], [dplr, DPLR_FORM], [gated_delta_product, GDP_FORM], [hebbian, HEBBIAN_FORM], [gla, GLA_FORM], [rwkv6, RWKV6_FORM], [gdn2, GDN2_FORM], [gated_oja, GATED_OJA_FORM]];
/** The steps per token swept: every n_h Gated DeltaProduct allows (one for the other rules). */
const stepsOf = (decl: RuleDecl): number[] => (decl.tokenRows !== undefined ? [1, 2, 3] : [1]);

/** Every shape, storage dtype, summation mode and zero pattern on one seed; the first difference, or null. */
function sweep(decl: RuleDecl, fast: InnerPair<string>, seed: number): { diff: string | null; compared: number } {
  const rng = new Rng(seed);
  let compared = 0;
  for (const nh of stepsOf(decl)) for (const [d, s] of SHAPES) {
    for (const dtype of ["f64", "f32"] as DType[]) {
      for (const { acc, rounding } of MODES) {
        for (const zeros of [false, true]) {
          const c = randomCase(decl, rng, d, s, dtype, zeros, rng.next() < 0.7, nh);
          const ref = withAccumulate(acc, () => runPair(decl.inner, c), rounding);
          const got = withAccumulate(acc, () => runPair(fast, c), rounding);
          const diff = firstDifference(got, ref);
          if (diff !== null) return { diff: `${decl.key} seed ${seed}${nh > 1 ? ` n_h=${nh}` : ""} d=${d} T=${s} ${dtype} ${acc}-sums ${JSON.stringify(rounding)}${zeros ? " with zeros" : ""}: ${diff}`, compared };
          compared++;
        }
      }
    }
  }
  return { diff: null, compared };
}

/** Seeds of the bitwise sweep (each: 11 shapes x 2 dtypes x 5 modes x 2 zero patterns). */
const SEEDS = [1, 2, 3];

for (const [decl] of RULES) {
  test(`${decl.key}: the fast pair equals the reference pair bitwise (forward, backward, state gradients), seeds ${SEEDS.join(", ")}`, () => {
    const fast = judgePair(decl);
    expect(hasFastPair(decl)).toBe(true);
    expect(fast).not.toBe(decl.inner);
    for (const seed of SEEDS) {
      const { diff, compared } = sweep(decl, fast, seed);
      if (diff !== null) throw new Error(diff);
      expect(compared).toBe(stepsOf(decl).length * SHAPES.length * 2 * MODES.length * 2);
    }
  }, 120_000);
}

/**
 * One wrong term per rule, planted in the loops' source: each must make the comparison fail.
 * KDA: dk's second term without the channel decay w; Comba: dp read from M_{t+1} instead of M_t;
 * DPLR: the decay's column sum dα with the wrong sign; Gated DeltaProduct: dk's term through the
 * states between the steps (P_hᵀ de, h ≥ 1) scaled by the decay as if read through P_0 (n_h ≥ 2 only),
 * and, apart, the backward reading the replay's kept P_h one row too far on (n_h ≥ 2 only); Hebbian:
 * dα read from M_{t+1} instead of M_t; GLA: the adjoint's decay on the row's channel (W[i]) instead
 * of the column's (W[j]); RWKV-6: dq's bonus term without the bonus weight u; GDN2: the gated read's
 * gradient g = diag(a) M_tᵀ de without the decay a; gated Oja: dv's reconstruction term diag(a) M_t de
 * without the decay a.
 */
const PLANTS: [RuleDecl, FastForm, string, string][] = [
  [kda, KDA_FORM, "dk[o + j]! += W[j]! * accK[j]!", "dk[o + j]! += accK[j]!"],
  [comba, COMBA_FORM, "accP[j]! + M[mt + r + j]! * dei", "accP[j]! + M[mn + r + j]! * dei"],
  [dplr, DPLR_FORM, "dalpha[o + j] = -col[j]!", "dalpha[o + j] = col[j]!"],
  [gated_delta_product, GDP_FORM, "dk[o + j]! += accK[p + j]!", "dk[o + j]! += decay * accK[p + j]!"],
  [gated_delta_product, GDP_FORM, "b0 = ((t - t0) * (nh - 1) + h - 1) * dd + r0,", "b0 = ((t - t0) * (nh - 1) + h - 1) * dd + r0 + d,"],
  [hebbian, HEBBIAN_FORM, "fa + Dj * M[mt + r + j]!", "fa + Dj * M[mn + r + j]!"],
  [gla, GLA_FORM, "D[r + j] = Dj * W[j]!", "D[r + j] = Dj * W[i]!"],
  [rwkv6, RWKV6_FORM, "dq[o + j] = accQ[j]! + c * U[o + j]! * K[o + j]!", "dq[o + j] = accQ[j]! + c * K[o + j]!"],
  [gdn2, GDN2_FORM, "const g = A[j]! * accK[j]!;", "const g = accK[j]!;"],
  [gated_oja, GATED_OJA_FORM, "dv[o + i]! += a * tmp[i]!;", "dv[o + i]! += tmp[i]!;"],
];
for (const [decl, form, from, to] of PLANTS) {
  test(`${decl.key}: a fast pair with one term wrong fails the comparison (${to})`, () => {
    let edited = 0;
    const planted = auxFastPair(decl, form, (src) => {
      // the source text as the engine prints it: match without the non-null assertions TypeScript drops
      const f = from.replaceAll("!", ""), t = to.replaceAll("!", "");
      edited = src.split(f).length - 1;
      return src.replaceAll(f, t);
    });
    const { diff } = sweep(decl, planted, 1);
    expect(edited).toBeGreaterThan(0);
    expect(diff).not.toBeNull();
  }, 60_000);
}

test("the two modules keep state at the same interval", () => {
  expect(CHECKPOINT_EVERY_AUX).toBe(CHECKPOINT_EVERY);
});
