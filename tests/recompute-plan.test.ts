/**
 * Recompute plans are checked when a block registers (docs/spec/tape.md#recompute): an unknown
 * producer or a cycle is rejected by registerOpaque itself, before any forward or backward runs.
 */
import { expect, test } from "bun:test";
import { buildRecomputePlan, type Producer } from "../src/recompute.ts";
import { opaqueKeys, registerOpaque } from "../src/tape.ts";
import type { Tensor } from "../src/tensor.ts";

const noop = (): Record<string, Tensor> => ({});
const producer = (name: string, from: string[], makes: string[]): Producer => ({ name, from, makes, run: noop });

function block(key: string, producers: Producer[]) {
  return {
    key, inputs: ["x"], outputs: ["y"], saved: ["a", "b"],
    backward: () => ({}),
    recompute: { stored: ["x"], producers },
  };
}

test("a producer reading a name nobody stores or makes is rejected at registration", () => {
  expect(() => registerOpaque(block("test.unknown-producer", [producer("p", ["x", "ghost"], ["a", "b"])])))
    .toThrow(/producer 'p' reads 'ghost'.*unknown producer/);
  expect(opaqueKeys()).not.toContain("test.unknown-producer");
});

test("a saved tensor nobody makes is rejected at registration", () => {
  expect(() => registerOpaque(block("test.unmade", [producer("p", ["x"], ["a"])])))
    .toThrow(/saved tensor 'b' is neither stored nor made/);
  expect(opaqueKeys()).not.toContain("test.unmade");
});

test("producers that feed each other in a cycle are rejected at registration", () => {
  expect(() => registerOpaque(block("test.cycle", [producer("p", ["x", "b"], ["a"]), producer("q", ["a"], ["b"])])))
    .toThrow(/cycle: (p -> q -> p|q -> p -> q)/);
  expect(opaqueKeys()).not.toContain("test.cycle");
});

test("a name made twice is rejected", () => {
  expect(() => buildRecomputePlan("k", ["a"], { stored: ["x"], producers: [producer("p", ["x"], ["a"]), producer("q", ["x"], ["a"])] }))
    .toThrow(/made by two producers/);
});

test("the plan orders producers after what they read", () => {
  const plan = buildRecomputePlan("k", ["a", "b", "c"], {
    stored: ["x"],
    producers: [producer("late", ["b"], ["c"]), producer("mid", ["a"], ["b"]), producer("first", ["x"], ["a"])],
  });
  expect(plan.order.map((p) => p.name)).toEqual(["first", "mid", "late"]);
});

test("every rule block registers a valid plan", async () => {
  const { RULES } = await import("../src/rules/index.ts");
  const { recomputePlanOf } = await import("../src/tape.ts");
  for (const r of RULES) expect(recomputePlanOf(r.key)).toBeDefined();
});
