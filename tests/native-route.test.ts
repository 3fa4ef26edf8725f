/**
 * The steps of a native case's route that take and give data (docs/spec/kernel-abi.md#route-of-a-case):
 * the summing mode set and restored by the caller that runs the reference (src/precision.ts
 * enterAccumulate, leaveAccumulate), the plain reference's runs combined (oracle/plain-reference.ts
 * plainYardstickOf), and the shape a case line gives of a case (harness/child-announce.ts caseShape).
 */
import { expect, test } from "bun:test";
import { caseShape } from "../harness/child-announce.ts";
import type { SeqTensors } from "../oracle/kernel-case.ts";
import { plainOrders, plainYardstickOf, plainYardstickSeq, PLAIN_RUNS } from "../oracle/plain-reference.ts";
import { accumulatesInF32, enterAccumulate, leaveAccumulate, productsInTF32, roundsRandomly, sumsReversed, withAccumulate, type SumRounding } from "../src/precision.ts";

const mode = () => ({ f32: accumulatesInF32(), tf32: productsInTF32(), reversed: sumsReversed(), random: roundsRandomly() });

test("enterAccumulate sets withAccumulate's mode; leaveAccumulate restores the mode before, nested", () => {
  const outside = mode();
  const a = enterAccumulate("f32", "reversed");
  expect(mode()).toEqual({ f32: true, tf32: false, reversed: true, random: false });
  const b = enterAccumulate("tf32", { random: 3 });
  expect(mode()).toEqual({ f32: true, tf32: true, reversed: false, random: true });
  leaveAccumulate(b);
  expect(mode()).toEqual({ f32: true, tf32: false, reversed: true, random: false });
  leaveAccumulate(a);
  expect(mode()).toEqual(outside);
  // a random stream restored as it was
  const c = enterAccumulate("f32", { random: 2 });
  leaveAccumulate(enterAccumulate("f64", "reversed"));
  expect(mode()).toEqual({ f32: true, tf32: false, reversed: false, random: true });
  leaveAccumulate(c);
  // the same modes as withAccumulate's
  for (const [acc, r] of [["f32", "natural"], ["tf32", "reversed"], ["f64", { random: 1 }]] as const) {
    const inside = withAccumulate(acc, () => mode(), r as SumRounding);
    const m = enterAccumulate(acc, r as SumRounding);
    expect(mode()).toEqual(inside);
    leaveAccumulate(m);
  }
});

/** A record whose values differ by order: run i's value at element j. */
const runOf = (o: SumRounding, k: number): SeqTensors => {
  const shift = o === "natural" ? 0 : o === "reversed" ? 1 : o.random + 1;
  const v = (base: number) => Float64Array.from({ length: 4 }, (_, j) => base + ((j + shift + k) % 4 === 0 ? shift * 0.1 : -shift * 0.01));
  return { y: v(1), state: { S: v(2) }, grads: { k: v(3) }, dState0: { S: v(4) } };
};
const ref64: SeqTensors = { y: new Float64Array(4).fill(1), state: { S: new Float64Array(4).fill(2) }, grads: { k: new Float64Array(4).fill(3) }, dState0: { S: new Float64Array(4).fill(4) } };

test("plainYardstickOf on the runs made in plainOrders' order is plainYardstickSeq's yardstick", () => {
  const orders = plainOrders("f32", PLAIN_RUNS);
  expect(orders.length).toBeGreaterThan(2);
  const of = plainYardstickOf(ref64, orders.map((o) => runOf(o, 0)));
  const seq = plainYardstickSeq("f32", ref64, (o) => runOf(o, 0), PLAIN_RUNS);
  expect(of).toEqual(seq);
  // not the first run alone: an element where a later run is farther from ref64 takes that run's value
  expect(Array.from(of.y!)).not.toEqual(Array.from(runOf("natural", 0).y!));
  for (const [i, x] of Array.from(of.grads.k!).entries()) {
    const far = Math.max(...orders.map((o) => Math.abs(runOf(o, 0).grads.k![i]! - 3)));
    expect(Math.abs(x - 3)).toBe(far);
  }
  // one run (f64 sums): that run as it is
  const one = runOf("natural", 0);
  expect(plainYardstickOf(ref64, [one]).y).toBe(one.y);
  expect(() => plainYardstickOf(ref64, [])).toThrow("no run");
});

test("caseShape: a batch case's and a rule case's shape; nothing for what is neither", () => {
  const spec = { d: 4, seq_len: 7, hyper: { a: 1 }, seed: 9 };
  expect(caseShape({ base: spec, B: 2, H: 3, C: 4 })).toEqual({ B: 2, T: 7, H: 3, d: 4, C: 4, hyper: { a: 1 }, caseSeed: 9 });
  expect(caseShape(spec)).toEqual({ B: 1, T: 7, H: 1, d: 4, C: null, hyper: { a: 1 }, caseSeed: 9 });
  expect(caseShape(5)).toEqual({});
});
