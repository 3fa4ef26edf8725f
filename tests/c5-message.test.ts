/** A C5 failure line names where the bad element is: the tensor, the sequence of the batch, the element. */
import { expect, test } from "bun:test";
import { flashCompare } from "../oracle/kernel-judge.ts";

test("a C5 failure in a one-sequence case names sequence 0 as well as the element", () => {
  const ref = [0.5, -0.25, 0.75, 1.0];
  const out = flashCompare([{ name: "y", group: "out", seq: 0, kernel: [0.5, -0.25, 0.9, 1.0], ref64: ref, ref32: ref }], new Set(), "the kernel");
  expect(out.ok).toBe(false);
  expect(out.message).toContain("y (sequence 0): max |kernel - ref64|");
  expect(out.message).toContain("at [2]");
});
