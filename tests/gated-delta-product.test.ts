/**
 * Gated DeltaProduct's reference pair (docs/spec/titans-family.md#gated-delta-product), before it
 * joins the registry: n_h = 1 is Gated Delta bitwise; for n_h = 1, 2, 3 the forward equals the
 * key-major form written independently from the sheet, and every gradient (dM_0 included) matches
 * central finite differences of ⟨dy, y⟩ + ⟨dM, M_s⟩ in f64. Planted, each must fail: one Householder
 * step dropped (the last step of every token, forward and backward alike: the key-major form and,
 * at n_h = 1, the Gated Delta invariant catch it), and the same step dropped in the backward only
 * (finite differences catch it). Where PyTorch is installed, the forward equals the Householder-product
 * form of python/nlc_torch/rules.py (`_gated_delta_product`, C9's reference once the rule is
 * registered), and the dropped step is far from it.
 */
import { describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { probeTorchSync } from "../oracle/torch-bridge.ts";
import { ROOT } from "../paths.ts";
import { equalsGatedDeltaAtOneStep, gatedDeltaProductInner, householderSteps, keyMajorForward, randomCase } from "../src/rules/gated_delta_product.ts";
import { runStretches } from "../src/rules/rule-recompute.ts";
import { Tensor } from "../src/tensor.ts";
import type { InnerGrads, InnerInputs, InnerPair, RuleConfig } from "../src/rules/types.ts";

/** θ with the last step of every token set to 0: that step is the identity, i.e. dropped. */
function lastStepDropped(theta: Tensor, cfg: RuleConfig): Tensor {
  const nh = householderSteps(cfg), out = new Tensor(theta.dtype, theta.shape, theta.data.slice());
  for (let t = 0; t < cfg.seq_len; t++) out.data[t * nh + nh - 1] = 0;
  return out;
}

const dropped: InnerPair<string> = {
  saved: gatedDeltaProductInner.saved,
  forward: (inp, st, cfg) => gatedDeltaProductInner.forward({ ...inp, theta: lastStepDropped(inp.theta!, cfg) }, st, cfg),
  backward: (sv, inp, dy, cfg, dF) => {
    const g = gatedDeltaProductInner.backward(sv, { ...inp, theta: lastStepDropped(inp.theta!, cfg) }, dy, cfg, dF);
    return g;
  },
};

/** The last step dropped in the backward only (its forward is the clean one). */
const droppedInBackward: InnerPair<string> = {
  saved: gatedDeltaProductInner.saved,
  forward: gatedDeltaProductInner.forward,
  backward: (sv, inp, dy, cfg, dF) => gatedDeltaProductInner.backward(sv, { ...inp, theta: lastStepDropped(inp.theta!, cfg) }, dy, cfg, dF),
};

/** Worst |y − y_ref| and |M_s − M_ref| against the key-major form. */
function keyMajorGap(pair: InnerPair<string>, seed: number, nh: number): number {
  const { inp, M0, cfg } = randomCase("f64", seed, nh);
  const a = pair.forward(inp, { M: M0 }, cfg);
  const r = keyMajorForward(inp, M0, cfg);
  let gap = 0;
  r.y.forEach((x, i) => (gap = Math.max(gap, Math.abs(x - a.y.data[i]!))));
  r.M.forEach((x, i) => (gap = Math.max(gap, Math.abs(x - a.finalState.M!.data[i]!))));
  return gap;
}

const INPUTS = ["k", "v", "q", "alpha", "theta"] as const;

/**
 * For each input and for M_0, along a random direction u: the gradient's directional derivative
 * Σ g_i u_i against central differences. Returns the worst error relative to Σ |g_i u_i| and the
 * smallest such scale (which must be far from 0 for the comparison to mean anything).
 */
function fdGap(pair: InnerPair<string>, seed: number, nh: number): { rel: number; minAbs: number } {
  const { inp, M0, dy, dM, cfg } = randomCase("f64", seed, nh, 3, 4);
  const loss = (i: InnerInputs, m: Tensor) => {
    const f = pair.forward(i, { M: m }, cfg);
    let l = 0;
    for (let j = 0; j < f.y.size; j++) l += dy.data[j]! * f.y.data[j]!;
    for (let j = 0; j < dM.size; j++) l += dM.data[j]! * f.finalState.M!.data[j]!;
    return l;
  };
  const f = pair.forward(inp, { M: M0 }, cfg);
  const g: InnerGrads = pair.backward(f.saved, inp, dy, cfg, { M: dM });
  let seedDir = seed * 7919 + nh;
  const dir = (n: number) => Float64Array.from({ length: n }, () => ((seedDir = (seedDir * 48271) % 2147483647) / 2147483647) * 2 - 1);
  const shifted = (t: Tensor, u: Float64Array, h: number) => new Tensor(t.dtype, t.shape, Float64Array.from(t.data, (x, i) => x + h * u[i]!));
  const h = 1e-6;
  let rel = 0, minAbs = Infinity;
  for (const name of [...INPUTS, "M0"] as const) {
    const base = name === "M0" ? M0 : inp[name]!;
    const u = dir(base.size);
    const grad = name === "M0" ? g.dState0!.M! : g[`d${name}` as keyof InnerGrads] as Tensor;
    let an = 0, scale = 0;
    for (let i = 0; i < u.length; i++) {
      an += grad.data[i]! * u[i]!;
      scale += Math.abs(grad.data[i]! * u[i]!);
    }
    const at = (hh: number) => name === "M0" ? loss(inp, shifted(M0, u, hh)) : loss({ ...inp, [name]: shifted(base, u, hh) }, M0);
    const fd = (at(h) - at(-h)) / (2 * h);
    // relative to the sum of the terms' magnitudes: a directional derivative near 0 by cancellation
    // does not inflate the error, and a gradient near 0 everywhere shows as a small scale
    rel = Math.max(rel, Math.abs(an - fd) / scale);
    minAbs = Math.min(minAbs, scale);
  }
  return { rel, minAbs };
}

const SEEDS = Array.from({ length: 20 }, (_, i) => i + 1);

describe("Gated DeltaProduct reference pair", () => {
  for (const dtype of ["f64", "f32"] as const) {
    test(`${dtype}: n_h = 1 is Gated Delta bitwise; one step dropped is not`, () => {
      for (const seed of SEEDS) {
        expect({ seed, clean: equalsGatedDeltaAtOneStep(gatedDeltaProductInner, dtype, seed) }).toEqual({ seed, clean: null });
        expect({ seed, planted: typeof equalsGatedDeltaAtOneStep(dropped, dtype, seed) }).toEqual({ seed, planted: "string" });
      }
    });
  }

  for (const nh of [1, 2, 3]) {
    test(`n_h = ${nh}: the forward is the key-major form; one step dropped is far from it`, () => {
      for (const seed of SEEDS) {
        expect({ seed, gap: keyMajorGap(gatedDeltaProductInner, seed, nh) < 1e-12 }).toEqual({ seed, gap: true });
        expect({ seed, planted: keyMajorGap(dropped, seed, nh) > 1e-3 }).toEqual({ seed, planted: true });
      }
    });

    test(`n_h = ${nh}: every gradient and dM_0 match central differences; the backward without its last step does not`, () => {
      for (const seed of SEEDS) {
        const clean = fdGap(gatedDeltaProductInner, seed, nh);
        expect({ seed, rel: clean.rel < 1e-7, informative: clean.minAbs > 1e-3 }).toEqual({ seed, rel: true, informative: true });
        expect({ seed, planted: fdGap(droppedInBackward, seed, nh).rel > 1e-3 }).toEqual({ seed, planted: true });
      }
    });
  }

  for (const nh of [1, 2, 3]) {
    test(`n_h = ${nh}: run in stretches by token (as the level recomputes), y, the final state and every saved tensor are the whole run's, bitwise`, () => {
      for (const seed of SEEDS) {
        const { inp, M0, cfg } = randomCase("f64", seed, nh);
        const whole = gatedDeltaProductInner.forward(inp, { M: M0 }, cfg);
        const parts = runStretches(gatedDeltaProductInner, inp, { M: M0 }, cfg, [0, 2, 3, 6]);
        const same = (a: Tensor, b: Tensor) => a.size === b.size && Array.from(a.data).every((x, i) => Object.is(x, b.data[i]));
        const got = { y: same(parts.y, whole.y), M: same(parts.finalState.M!, whole.finalState.M!),
          saved: gatedDeltaProductInner.saved.map((n) => same(parts.saved[n]!, whole.saved[n]!)) };
        expect({ seed, ...got }).toEqual({ seed, y: true, M: true, saved: gatedDeltaProductInner.saved.map(() => true) });
      }
    });
  }

  test("n_h outside {1, 2, 3} and rows that are not s·n_h are errors naming them", () => {
    const { inp, M0, cfg } = randomCase("f64", 1, 2);
    expect(() => gatedDeltaProductInner.forward(inp, { M: M0 }, { ...cfg, n_h: 4 })).toThrow(/n_h must be 1, 2 or 3, got 4/);
    expect(() => gatedDeltaProductInner.forward(inp, { M: M0 }, { ...cfg, n_h: 3 })).toThrow(/k, v need \[s, n_h·d\] = \[7, 15\] and theta \[s, n_h\] = \[7, 3\]/);
  });
});

const torch = probeTorchSync();
const PYTHON = process.env.NLC_TORCH_PYTHON ?? "/usr/bin/python3";

/** Worst gap of y and M_s between each pair and the PyTorch forward, one Python run for all cases. */
function torchGaps(pairs: readonly InnerPair<string>[], seeds: readonly number[], nh: number): number[][] {
  const cases = seeds.map((seed) => randomCase("f64", seed, nh));
  const payload = cases.map(({ inp, M0, cfg }) => ({
    k: Array.from(inp.k.data), v: Array.from(inp.v.data), q: Array.from(inp.q.data), alpha: Array.from(inp.alpha!.data),
    theta: Array.from(inp.theta!.data), M0: Array.from(M0.data), d: cfg.d, s: cfg.seq_len, n_h: nh,
  }));
  const script = `
import json, sys, torch
from nlc_torch import rules as r
out = []
for c in json.load(sys.stdin):
    d, s, nh = c["d"], c["s"], c["n_h"]
    T = lambda x, *sh: torch.tensor(x, dtype=torch.float64).reshape(*sh)
    y, st = r._gated_delta_product(T(c["k"], s * nh, d), T(c["v"], s * nh, d), T(c["q"], s, d), None,
        {"alpha": T(c["alpha"], s), "theta": T(c["theta"], s * nh)}, None, {"M": T(c["M0"], d, d)}, {"d": d, "seq_len": s, "n_h": nh})
    out.append({"y": y.reshape(-1).tolist(), "M": st["M"].reshape(-1).tolist()})
json.dump(out, sys.stdout)`;
  const p = spawnSync(PYTHON, ["-c", script], { input: JSON.stringify(payload), encoding: "utf8", env: { ...process.env, PYTHONPATH: join(ROOT, "python") } });
  if (p.status !== 0) throw new Error(`the PyTorch forward failed: ${p.stderr}`);
  const ref = JSON.parse(p.stdout) as { y: number[]; M: number[] }[];
  return pairs.map((pair) => cases.map(({ inp, M0, cfg }, i) => {
    const a = pair.forward(inp, { M: M0 }, cfg);
    let gap = 0;
    ref[i]!.y.forEach((x, j) => (gap = Math.max(gap, Math.abs(x - a.y.data[j]!))));
    ref[i]!.M.forEach((x, j) => (gap = Math.max(gap, Math.abs(x - a.finalState.M!.data[j]!))));
    return gap;
  }));
}

describe.skipIf(!torch.available)("Gated DeltaProduct against the PyTorch forward", () => {
  for (const nh of [1, 2, 3]) {
    test(`n_h = ${nh}: the pair is the Householder-product form; one step dropped is far from it`, () => {
      const [clean, planted] = torchGaps([gatedDeltaProductInner, dropped], SEEDS, nh);
      for (const [i, seed] of SEEDS.entries()) {
        expect({ seed, clean: clean![i]! < 1e-12, planted: planted![i]! > 1e-3 }).toEqual({ seed, clean: true, planted: true });
      }
    }, 120_000); // a Python start with torch
  }
});
