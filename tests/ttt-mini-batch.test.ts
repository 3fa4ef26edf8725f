/**
 * TTT-Linear's mini-batch form (docs/spec/ttt.md#ttt-mini-batch): the reference computes fla's
 * form for C > 1 (C8 reads it) though the rule is C = 1; its hand-written backward is held here to
 * f64 central differences (Richardson, oracle/fd.ts), over every input and state entry, for C = 2, 3
 * and a last mini-batch cut short; and C = 1 is the rule's own pair bit for bit.
 */
import { expect, test } from "bun:test";
import { fdGradient } from "../oracle/fd.ts";
import { Rng, uniformTensor } from "../src/rng.ts";
import { Tensor } from "../src/tensor.ts";
import { ttt_linear, tttBackward, tttForward } from "../src/rules/ttt_linear.ts";
import type { InnerInputs, RuleConfig, State } from "../src/rules/types.ts";

function setup(seed: number, d: number, s: number) {
  const rng = new Rng(seed);
  const inp: InnerInputs = (() => {
    const k = uniformTensor("f64", [s, d], rng, -1, 1);
    return { k, v: uniformTensor("f64", [s, d], rng, -1, 1), q: uniformTensor("f64", [s, d], rng, -1, 1), x: k, theta: uniformTensor("f64", [s], rng, 0.1, 0.6) };
  })();
  const state: State = {
    M: uniformTensor("f64", [d, d], rng, -0.5, 0.5), M_b: uniformTensor("f64", [d], rng, -0.5, 0.5),
    ln_w: uniformTensor("f64", [d], rng, 0.5, 1.5), ln_b: uniformTensor("f64", [d], rng, -0.5, 0.5),
  };
  const dy = uniformTensor("f64", [s, d], rng, -1, 1);
  const dFinal: State = {
    M: uniformTensor("f64", [d, d], rng, -1, 1), M_b: uniformTensor("f64", [d], rng, -1, 1),
    ln_w: uniformTensor("f64", [d], rng, -1, 1), ln_b: uniformTensor("f64", [d], rng, -1, 1),
  };
  return { inp, state, dy, dFinal };
}

function dotAll(a: Tensor, b: Tensor): number {
  let acc = 0;
  for (let i = 0; i < a.size; i++) acc += a.data[i]! * b.data[i]!;
  return acc;
}

for (const [C, s] of [[2, 4], [3, 5], [3, 3]] as const) {
  test(`mini-batch C = ${C}, ${s} tokens: the backward is the central-difference gradient`, () => {
    const d = 4, cfg: RuleConfig = { d, seq_len: s, eps: 1e-5 };
    for (const seed of [1, 2, 3]) {
      const { inp, state, dy, dFinal } = setup(seed, d, s);
      const L = () => {
        const r = tttForward(inp, state, cfg, C);
        let l = dotAll(r.y, dy);
        for (const [n, g] of Object.entries(dFinal)) l += dotAll(r.finalState[n]!, g);
        return l;
      };
      const g = tttBackward(tttForward(inp, state, cfg, C).saved, inp, dy, cfg, C, dFinal);
      const pairs: [string, Tensor, Tensor][] = [
        ["k", inp.k, g.dk!], ["v", inp.v, g.dv!], ["q", inp.q, g.dq!], ["theta", inp.theta!, g.dtheta!],
        ...Object.keys(state).map((n): [string, Tensor, Tensor] => [`state.${n}`, state[n]!, g.dState0![n]!]),
      ];
      for (const [name, x, got] of pairs) {
        const fd = fdGradient(L, x);
        const scale = Math.max(1, ...fd.map(Math.abs));
        const worst = Math.max(...fd.map((f, i) => Math.abs(f - got.data[i]!)));
        expect({ seed, name, ok: worst <= 1e-7 * scale, worst }).toEqual({ seed, name, ok: true, worst });
        expect(Math.max(...fd.map(Math.abs))).toBeGreaterThan(1e-6); // not vacuous
      }
    }
  });
}

test("C = 1 is the rule's own pair, bit for bit", () => {
  const d = 4, s = 5, cfg: RuleConfig = { d, seq_len: s, eps: 1e-6 };
  const { inp, state, dy, dFinal } = setup(7, d, s);
  const a = tttForward(inp, state, cfg, 1), b = ttt_linear.inner.forward(inp, state, cfg);
  expect(Array.from(a.y.data)).toEqual(Array.from(b.y.data));
  const ga = tttBackward(a.saved, inp, dy, cfg, 1, dFinal), gb = ttt_linear.inner.backward(b.saved, inp, dy, cfg, dFinal);
  expect(Array.from(ga.dk!.data)).toEqual(Array.from(gb.dk!.data));
  expect(Array.from(ga.dState0!.M!.data)).toEqual(Array.from(gb.dState0!.M!.data));
});

test("C = 3 differs from C = 1: the mini-batch reads its first state", () => {
  const d = 4, s = 3, cfg: RuleConfig = { d, seq_len: s, eps: 1e-6 };
  const { inp, state } = setup(9, d, s);
  const a = tttForward(inp, state, cfg, 3), b = tttForward(inp, state, cfg, 1);
  expect(a.y.data[d]).not.toBe(b.y.data[d]); // token 1
  expect(Array.from(a.y.data.slice(0, d))).toEqual(Array.from(b.y.data.slice(0, d))); // token 0
});
