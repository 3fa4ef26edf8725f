/**
 * Gated DeltaProduct at level scope (docs/spec/titans-family.md#gated-delta-product-level): the
 * declaration's n_h rows per token of k, v and θ (tokenRows) through the shared level machinery.
 * At n_h = 1 the whole rule (projections, normalisation, gates, the pair, the backward tail) equals
 * Gated Delta's bitwise: y, the final state, dX, every parameter's gradient and dM_0. For n_h = 2, 3
 * every gradient of ⟨dy, y⟩ + ⟨dM, M_s⟩ (dX, each used parameter, dM_0) matches central differences
 * (h = 1e-6, f64, d = 3, s = 4) along a random direction, relative to Σ |g_i u_i|: bound 1e-4 (seeds
 * 1-300 needed at most 4.5e-6; the scale was at least 2.1e-5, the bound on it 1e-6), and θ_{t,j} is
 * the gate of its own row [k_{t,j}; v_{t,j}]. Planted, each must fail: the last Householder step
 * dropped (θ = 0 there, forward and backward alike) is not Gated Delta at n_h = 1 (300 of 300 seeds);
 * the same step dropped in the backward only misses the central differences by 0.25 or more (seeds 1-300).
 * Where PyTorch is installed, python/nlc_torch/rules.py's level_forward, given the declaration's
 * generated metadata (token_rows, W_K ["n_h*d", "d"]), computes the same y and final state for
 * n_h = 1, 2, 3 (seeds 1-20: at most 6.7e-16; bound 1e-12); planted, each is far from it: θ read
 * from the token's first row (PyTorch side, n_h = 2, 3: 1.9e-2 or more) and the dropped step
 * (TypeScript side: 0.21 or more).
 */
import { describe, expect, test } from "bun:test";
import { spawnSync } from "node:child_process";
import { join } from "node:path";
import { abiOf, signature, tokenElems } from "../ffi/abi.ts";
import { ruleAbiOf } from "../ffi/generate.ts";
import { tokenWidth } from "../cases/kernel-layout.ts";
import { ruleMetaOf } from "../ffi/generate-registry.ts";
import { probeTorchSync } from "../oracle/torch-bridge.ts";
import { ROOT } from "../paths.ts";
import * as K from "../src/numeric.ts";
import { Rng } from "../src/rng.ts";
import { Tensor } from "../src/tensor.ts";
import { gated_delta } from "../src/rules/gated_delta.ts";
import { gated_delta_product, gatedDeltaProductInner, householderSteps } from "../src/rules/gated_delta_product.ts";
import { paramShapes, ruleBackwardWithState, ruleForwardSaved, usedParams, withDefaults } from "../src/rules/level.ts";
import type { InnerPair, RuleConfig, RuleDecl } from "../src/rules/types.ts";

function rand(rng: Rng, shape: number[], lo: number, hi: number, dtype: "f64" | "f32" = "f64"): Tensor {
  const t = new Tensor(dtype, shape);
  for (let i = 0; i < t.size; i++) t.data[i] = rng.uniform(lo, hi);
  return t;
}

/** A random level case: X, every parameter at its declared shape, a random M_0, dy and dM. */
function levelCase(decl: RuleDecl, nh: number, seed: number, dtype: "f64" | "f32" = "f64", d = 3, s = 4) {
  const rng = new Rng(seed);
  const cfg = withDefaults(decl, { d, seq_len: s, ...(decl.tokenRows ? { n_h: nh } : {}) });
  const params: Record<string, Tensor> = {};
  for (const [n, shape] of Object.entries(paramShapes(decl, cfg))) params[n] = rand(rng, shape, -0.6, 0.6, dtype);
  return {
    cfg, params, X: rand(rng, [s, d], -1, 1, dtype), M0: rand(rng, [d, d], -0.3, 0.3, dtype),
    dy: rand(rng, [s, d], -1, 1, dtype), dM: rand(rng, [d, d], -1, 1, dtype),
  };
}

function run(decl: RuleDecl, c: ReturnType<typeof levelCase>, inner: InnerPair<string> = decl.inner) {
  const f = ruleForwardSaved(decl, c.X, c.params, { M: c.M0 }, c.cfg, inner);
  const b = ruleBackwardWithState(decl, f.saved, c.dy, c.cfg, inner, { M: c.dM });
  return { f, b };
}

/** First place the n_h = 1 rule and Gated Delta differ, or null when every output is bitwise equal. */
function gapToGatedDelta(seed: number, dtype: "f64" | "f32", inner: InnerPair<string> = gatedDeltaProductInner): string | null {
  const c = levelCase(gated_delta_product, 1, seed, dtype, 4, 6);
  const a = run(gated_delta_product, c, inner);
  const g = run(gated_delta, { ...c, cfg: { d: c.cfg.d, seq_len: c.cfg.seq_len } as RuleConfig });
  const pairs: [string, Tensor | undefined, Tensor | undefined][] = [
    ["y", a.f.y, g.f.y], ["M_s", a.f.finalState.M, g.f.finalState.M], ["dM_0", a.b.dState0.M, g.b.dState0.M],
    ...Object.keys(g.b.grads).map((n) => [n, a.b.grads[n], g.b.grads[n]] as [string, Tensor | undefined, Tensor | undefined]),
  ];
  for (const [name, x, r] of pairs) {
    if (x === undefined || r === undefined) return `${name} missing`;
    if (x.size !== r.size) return `${name}: ${x.size} elements, Gated Delta ${r.size}`;
    for (let i = 0; i < r.size; i++) if (!Object.is(x.data[i], r.data[i])) return `${name}[${i}] = ${x.data[i]}, Gated Delta gives ${r.data[i]}`;
  }
  return null;
}

/**
 * For X, each parameter and M_0 along a random direction u: the error of Σ g_i u_i against central
 * differences of ⟨dy, y⟩ + ⟨dM, M_s⟩, relative to Σ |g_i u_i|; the smallest such scale beside it.
 */
function worstFdError(nh: number, seed: number, inner: InnerPair<string> = gatedDeltaProductInner): { err: number; scale: number } {
  const c = levelCase(gated_delta_product, nh, seed);
  const { b } = run(gated_delta_product, c, inner);
  const loss = (X: Tensor, params: Record<string, Tensor>, M0: Tensor) => {
    const f = ruleForwardSaved(gated_delta_product, X, params, { M: M0 }, c.cfg, gatedDeltaProductInner);
    return K.dot(f.y.data, c.dy.data, f.y.size, 0, 0) + K.dot(f.finalState.M!.data, c.dM.data, c.dM.size, 0, 0);
  };
  const rng = new Rng(seed + 7919);
  const h = 1e-6;
  let err = 0, scale = Infinity;
  const targets: [string, Tensor, Tensor][] = [["X", c.X, b.grads.X!], ["M_0", c.M0, b.dState0.M!]];
  for (const n of usedParams(gated_delta_product)) targets.push([n, c.params[n]!, b.grads[n]!]);
  for (const [, x, g] of targets) {
    const u = rand(rng, x.shape as number[], -1, 1);
    let dir = 0, mag = 0;
    for (let i = 0; i < x.size; i++) { dir += g.data[i]! * u.data[i]!; mag += Math.abs(g.data[i]! * u.data[i]!); }
    const shifted = (sign: number) => {
      const y = new Tensor(x.dtype, x.shape, x.data.slice());
      for (let i = 0; i < y.size; i++) y.data[i]! += sign * h * u.data[i]!;
      return y;
    };
    const at = (sign: number) => x === c.X ? loss(shifted(sign), c.params, c.M0)
      : x === c.M0 ? loss(c.X, c.params, shifted(sign))
      : loss(c.X, Object.fromEntries(Object.entries(c.params).map(([n, p]) => [n, p === x ? shifted(sign) : p])), c.M0);
    const fd = (at(1) - at(-1)) / (2 * h);
    err = Math.max(err, Math.abs(fd - dir) / mag);
    scale = Math.min(scale, mag);
  }
  return { err, scale };
}

/** θ with the last step of every token set to 0 (that step is the identity: dropped). */
function lastStepDropped(theta: Tensor, cfg: RuleConfig): Tensor {
  const nh = householderSteps(cfg), out = new Tensor(theta.dtype, theta.shape, theta.data.slice());
  for (let t = 0; t < cfg.seq_len; t++) out.data[t * nh + nh - 1] = 0;
  return out;
}
const dropped: InnerPair<string> = {
  saved: gatedDeltaProductInner.saved,
  forward: (inp, st, cfg) => gatedDeltaProductInner.forward({ ...inp, theta: lastStepDropped(inp.theta!, cfg) }, st, cfg),
  backward: (sv, inp, dy, cfg, dF) => gatedDeltaProductInner.backward(sv, { ...inp, theta: lastStepDropped(inp.theta!, cfg) }, dy, cfg, dF),
};
const droppedInBackward: InnerPair<string> = {
  saved: gatedDeltaProductInner.saved,
  forward: gatedDeltaProductInner.forward,
  backward: dropped.backward,
};

const SEEDS = Array.from({ length: 20 }, (_, i) => i + 1);

describe("Gated DeltaProduct at level scope", () => {
  test("parameters: W_K, W_V [n_h·d, d], the rest Gated Delta's", () => {
    for (const nh of [1, 2, 3]) {
      const shapes = paramShapes(gated_delta_product, withDefaults(gated_delta_product, { d: 5, seq_len: 2, n_h: nh }));
      const gd = paramShapes(gated_delta, { d: 5, seq_len: 2 });
      expect(shapes.W_K).toEqual([nh * 5, 5]);
      expect(shapes.W_V).toEqual([nh * 5, 5]);
      for (const n of Object.keys(gd)) if (n !== "W_K" && n !== "W_V") expect(shapes[n]).toEqual(gd[n]!);
    }
  });

  test("n_h = 1 is Gated Delta bitwise: y, M_s, dX, every parameter's gradient, dM_0 (f64 and f32, seeds 1-20)", () => {
    for (const dtype of ["f64", "f32"] as const) for (const seed of SEEDS) expect(gapToGatedDelta(seed, dtype)).toBeNull();
  });

  test("theta_{t,j} is the gate of row j's [k; v], alpha_t of the token's first row", () => {
    const c = levelCase(gated_delta_product, 3, 5);
    const { f } = run(gated_delta_product, c);
    const { k, v, theta, alpha } = f.saved;
    const d = c.cfg.d, nh = 3;
    const w = c.params.w_theta!.data, b = c.params.b_theta!.data[0]!, wa = c.params.w_alpha!.data, ba = c.params.b_alpha!.data[0]!;
    expect(theta!.shape).toEqual([c.cfg.seq_len, nh]);
    for (let r = 0; r < c.cfg.seq_len * nh; r++) {
      const pre = b + K.dot(w, k!.data, d, 0, r * d) + K.dot(w, v!.data, d, d, r * d);
      expect(theta!.data[r]).toBe(K.softplus(pre));
    }
    for (let t = 0; t < c.cfg.seq_len; t++) {
      const pre = ba + K.dot(wa, k!.data, d, 0, t * nh * d) + K.dot(wa, v!.data, d, d, t * nh * d);
      expect(alpha!.data[t]).toBe(K.sigmoid(pre));
      // each d-row of k is a unit vector
      for (let j = 0; j < nh; j++) expect(Math.abs(Math.sqrt(K.dot(k!.data, k!.data, d, (t * nh + j) * d, (t * nh + j) * d)) - 1)).toBeLessThan(1e-12);
    }
  });

  test("exact gradients: dX, every parameter and dM_0 against central differences, n_h = 2, 3 (f64, seeds 1-20)", () => {
    let worst = 0, smallest = Infinity;
    for (const nh of [2, 3]) {
      for (const seed of SEEDS) {
        const { err, scale } = worstFdError(nh, seed);
        worst = Math.max(worst, err);
        smallest = Math.min(smallest, scale);
      }
    }
    expect(worst).toBeLessThan(1e-4);
    expect(smallest).toBeGreaterThan(1e-6);
  });

  test("planted: the last Householder step dropped is not Gated Delta at n_h = 1 (every seed)", () => {
    for (const seed of SEEDS) expect(gapToGatedDelta(seed, "f64", dropped)).not.toBeNull();
  });

  test("planted: the last step dropped in the backward only misses the central differences (every seed)", () => {
    let least = Infinity;
    for (const seed of SEEDS) least = Math.min(least, worstFdError(2, seed, droppedInBackward).err);
    expect(least).toBeGreaterThan(1e-3);
  });
});

/**
 * y and M_s of the PyTorch level (level_forward with this declaration's generated metadata and
 * `_gated_delta_product` as its inner forward) for each case; `rowInputs` without theta plants θ
 * from the token's first row, used for each of its steps.
 */
function torchLevel(cases: ReturnType<typeof levelCase>[], rowInputs?: string[]): { y: number[]; M: number[]; shapes: Record<string, number[]> }[] {
  const meta = ruleMetaOf(gated_delta_product);
  const payload = {
    meta: rowInputs ? { ...meta, token_rows: { ...meta.token_rows, inputs: rowInputs } } : meta,
    cases: cases.map((c) => ({
      cfg: c.cfg, X: Array.from(c.X.data), M0: Array.from(c.M0.data),
      params: Object.fromEntries(Object.entries(c.params).map(([n, p]) => [n, { shape: p.shape, data: Array.from(p.data) }])),
    })),
  };
  const script = `
import json, sys, torch
from nlc_torch import rules as r
inp = json.load(sys.stdin)
m = inp["meta"]; key = m["key"]
r.META[key] = m; r.GATES[key] = tuple(m["gates"]); r.CHANNEL_GATES[key] = tuple(m["channel_gates"])
r.TOKEN_ROWS[key] = m["token_rows"]; r.NORMALIZE_KQ.add(key); r.INNER[key] = r._gated_delta_product
if "theta" not in m["token_rows"]["inputs"]:  # the plant: one theta per token (first row), for every step
    r.INNER[key] = lambda k, v, q, x, g, om, st, cfg: r._gated_delta_product(k, v, q, x, {**g, "theta": g["theta"].repeat_interleave(cfg["n_h"])}, om, st, cfg)
out = []
for c in inp["cases"]:
    cfg = r.resolve_config(key, c["cfg"])
    T = lambda x, sh: torch.tensor(x, dtype=torch.float64).reshape(*sh)
    P = {n: T(p["data"], p["shape"]) for n, p in c["params"].items()}
    d, s = cfg["d"], cfg["seq_len"]
    y, st = r.level_forward(key, T(c["X"], [s, d]), P, {"M": T(c["M0"], [d, d])}, cfg)
    out.append({"y": y.reshape(-1).tolist(), "M": st["M"].reshape(-1).tolist(), "shapes": {n: list(v) for n, v in r.param_shapes(key, cfg).items()}})
json.dump(out, sys.stdout)`;
  const p = spawnSync(PYTHON, ["-c", script], { input: JSON.stringify(payload), encoding: "utf8", env: { ...process.env, PYTHONPATH: join(ROOT, "python") } });
  if (p.status !== 0) throw new Error(`the PyTorch level failed: ${p.stderr}`);
  return JSON.parse(p.stdout);
}

/** Worst |y − y_torch| and |M_s − M_torch| of the TypeScript level with `inner` against the PyTorch level's. */
function gapsToTorch(cases: ReturnType<typeof levelCase>[], ref: ReturnType<typeof torchLevel>, inner: InnerPair<string> = gatedDeltaProductInner): number[] {
  return cases.map((c, i) => {
    const f = ruleForwardSaved(gated_delta_product, c.X, c.params, { M: c.M0 }, c.cfg, inner);
    let gap = 0;
    ref[i]!.y.forEach((x, j) => (gap = Math.max(gap, Math.abs(x - f.y.data[j]!))));
    ref[i]!.M.forEach((x, j) => (gap = Math.max(gap, Math.abs(x - f.finalState.M!.data[j]!))));
    return gap;
  });
}

describe("Gated DeltaProduct's kernel ABI row (generated from the declaration, not in the table yet)", () => {
  const a = ruleAbiOf(gated_delta_product);
  const shape = { B: 2, T: 5, H: 3, d: 4 };
  test("n_h is an i32 argument; k, v, theta and their gradients have n_h rows per token", () => {
    expect(a.tokenRows).toEqual({ hyper: "n_h", inputs: ["k", "v", "theta"] });
    expect(a.hyper).toEqual([{ name: "n_h", kind: "i32", min: 1, max: 3 }]);
    expect(signature(a, "forward").find((p) => p.name === "n_h")?.kind).toBe("i32");
    for (const nh of [1, 2, 3]) {
      const sizes = Object.fromEntries(["k", "v", "q", "alpha", "theta", "dk", "dv", "dq", "dalpha", "dtheta", "y"].map((n) => [n, tokenElems(a, n, shape, { n_h: nh })]));
      const tok = 2 * 5 * 3;
      expect(sizes).toEqual({
        k: tok * nh * 4, v: tok * nh * 4, q: tok * 4, alpha: tok, theta: tok * nh,
        dk: tok * nh * 4, dv: tok * nh * 4, dq: tok * 4, dalpha: tok, dtheta: tok * nh, y: tok * 4,
      });
    }
  });
  test("a sequence's per-token width (tokenWidth, what the packers and slicers move) is the pair's row", () => {
    for (const nh of [1, 2, 3]) {
      const w = Object.fromEntries(["k", "dv", "q", "alpha", "theta", "dtheta", "y"].map((n) => [n, tokenWidth(a, n, 4, { n_h: nh })]));
      expect(w).toEqual({ k: nh * 4, dv: nh * 4, q: 4, alpha: 1, theta: nh, dtheta: nh, y: 4 });
    }
    expect(() => tokenWidth(a, "theta", 4)).toThrow(/gated_delta_product.*n_h/);
    expect(tokenWidth(abiOf("kda")!, "alpha", 4)).toBe(4);
    expect(tokenWidth(abiOf("gated_delta")!, "theta", 4)).toBe(1);
  });
  test("sized without the call's n_h: an error naming it; the registered rules need none", () => {
    expect(() => tokenElems(a, "k", shape)).toThrow(/gated_delta_product.*n_h/);
    expect(tokenElems(a, "q", shape)).toBe(2 * 5 * 3 * 4);
    expect(tokenElems(abiOf("gated_delta")!, "k", shape)).toBe(2 * 5 * 3 * 4);
    expect(tokenElems(abiOf("kda")!, "alpha", shape)).toBe(2 * 5 * 3 * 4);
  });
});

const torch = probeTorchSync();
const PYTHON = process.env.NLC_TORCH_PYTHON ?? "/usr/bin/python3";

describe.skipIf(!torch.available)("Gated DeltaProduct's level against the PyTorch level", () => {
  test("the generated metadata: W_K, W_V [n_h*d, d], token_rows k, v, theta by n_h", () => {
    const m = ruleMetaOf(gated_delta_product);
    expect(m.params.W_K).toEqual(["n_h*d", "d"]);
    expect(m.params.W_V).toEqual(["n_h*d", "d"]);
    expect(m.token_rows).toEqual({ hyper: "n_h", inputs: ["k", "v", "theta"] });
  });

  for (const nh of [1, 2, 3]) {
    test(`n_h = ${nh}: y and M_s within 1e-12 (f64, seeds 1-20); theta from the first row and the dropped step are far from it`, () => {
      const cases = SEEDS.map((seed) => levelCase(gated_delta_product, nh, seed, "f64", 4, 6));
      const ref = torchLevel(cases);
      for (const [i, c] of cases.entries()) expect(ref[i]!.shapes).toEqual(paramShapes(gated_delta_product, c.cfg));
      const clean = gapsToTorch(cases, ref);
      const planted = gapsToTorch(cases, ref, dropped);
      // theta from the token's first row: the same at n_h = 1 (one row), wrong from n_h = 2
      const firstRow = nh > 1 ? gapsToTorch(cases, torchLevel(cases, ["k", "v"])) : null;
      for (const [i, seed] of SEEDS.entries()) {
        expect({ seed, clean: clean[i]! < 1e-12, planted: planted[i]! > 1e-3, firstRow: firstRow === null || firstRow[i]! > 1e-3 })
          .toEqual({ seed, clean: true, planted: true, firstRow: true });
      }
    }, 120_000); // a Python start with torch
  }
});
