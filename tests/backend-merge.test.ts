/**
 * A backend whose checks ran in a worker thread is reported as the worker found it: a `py:` backend
 * whose checks passed in the delegated worker is `available`, not "not run" (the main thread never
 * started its child process).
 */
import { expect, test } from "bun:test";
import { mergeBackendInfo } from "../conformance/parallel.ts";

test("backends: a py: backend that ran in a worker is available in the report", () => {
  const name = "py:examples/py-kernels/naive_delta.py:naive_delta";
  const main = [{ name: "ref", available: true }, { name, available: false, reason: "not run: no check of this backend ran" }];
  const worker = [{ name: "ref", available: true }, { name, available: true, device: "PyTorch kernel host" }];
  expect(mergeBackendInfo(main, [worker]).find((b) => b.name === name)?.available).toBe(true);
});

test("backends: a native backend probed in a worker replaces 'not probed'; a decided main entry stays", () => {
  const main = [
    { name: "cpu-emu", available: false, reason: "not probed: no C5 check ran" },
    { name: "cuda", available: false, reason: "no GPU" },
  ];
  const worker = [{ name: "cpu-emu", available: true }, { name: "cuda", available: true }];
  const merged = mergeBackendInfo(main, [worker]);
  expect(merged[0]!.available).toBe(true);
  expect(merged[1]).toEqual(main[1]!);
});
