/**
 * The steps of a case's route that take and give data (docs/spec/kernel-abi.md#route-of-a-case):
 * the sequences' rule case specs both case forms build from (cases/kernel-seq.ts seqSpecs), what a
 * kernel host's reply says of its configurations (conformance/kernel/python/configurations.ts), and the
 * parent's kept results of a kernel child's batch (harness/child-process.ts ChildResults).
 */
import { expect, test } from "bun:test";
import { seqSpecs } from "../cases/kernel-seq.ts";
import type { SeqExtra } from "../cases/kernel-batch.ts";
import type { RuleCaseSpec } from "../cases/rule-case.ts";
import { listedConfigurations, underConfiguration } from "../conformance/kernel/python/configurations.ts";
import { DEFAULT_CONFIGURATION } from "../harness/configurations.ts";
import { ChildResults, limitMs, stubResult, type BatchEntry } from "../harness/child-process.ts";
import type { DelegateOptions } from "../harness/check.ts";
import { checkSeed } from "../harness/replay-command.ts";

const base = { seed: 11, d: 4, seq_len: 6, alpha: "mid", theta: "small", state: "init" } as unknown as RuleCaseSpec;
const extra: SeqExtra[] = [
  { seed: 21, alpha: "low", theta: "large", state: "random" },
  { seed: 31, alpha: "high", theta: "small", state: "init" },
  { seed: 41, alpha: "mid", theta: "large", state: "random" },
];

test("seqSpecs: sequence 0 is the base, sequence n > 0 the base with extra n − 1; only count − 1 extras are read", () => {
  const specs = seqSpecs(base, extra, 3);
  expect(specs.length).toBe(3);
  expect(specs[0]).toBe(base);
  expect(specs[1]).toEqual({ ...base, seed: 21, alpha: "low", theta: "large", state: "random" } as RuleCaseSpec);
  expect(specs[2]!.seed).toBe(31);
  expect(specs.every((s) => s.d === 4 && s.seq_len === 6)).toBe(true);
});

test("seqSpecs: a packed case's sequences each at their own length", () => {
  const specs = seqSpecs(base, extra, 4, [3, 3, 0, 9]);
  expect(specs.map((s) => s.seq_len)).toEqual([3, 3, 0, 9]);
  expect(specs.map((s) => s.seed)).toEqual([11, 21, 31, 41]);
});

test("listedConfigurations: the default's name, the others in order, and how many compute as a listed one", () => {
  expect(listedConfigurations({})).toEqual({ base: DEFAULT_CONFIGURATION, names: [], same: 0, autotuned: null });
  expect(listedConfigurations({ configuration: "BT=16", configurations: ["BT=32", 7, "BT=64"], configurations_same: 2 }))
    .toEqual({ base: "BT=16", names: ["BT=32", "BT=64"], same: 2, autotuned: null });
  expect(listedConfigurations({ configurations: [], autotuned: 0 }).autotuned).toBe(0);
  const o = underConfiguration({ ok: false, message: "y off", details: { a: 1 } }, "BT=32");
  expect(o.message).toBe("configuration BT=32: y off");
  expect(o.details).toEqual({ a: 1, configuration: "BT=32" });
});

const opts = (o: Partial<DelegateOptions> = {}): DelegateOptions => ({ seed: 5, runSeed: 1, profile: "quick", selected: new Set(["a", "c"]), ...o });
const siblings: BatchEntry<string>[] = [{ id: "a", part: "pa" }, { id: "b", part: "pb" }, { id: "c", part: "pc" }];

test("ChildResults.request: a run asks for the check and its selected siblings in plan order; a replay for the check alone", () => {
  expect(ChildResults.request("py:m:f", "a", opts(), siblings)).toEqual({ backend: "py:m:f", profile: "quick", runSeed: 1, checks: [{ id: "a", part: "pa" }, { id: "c", part: "pc" }] });
  expect(ChildResults.request("py:m:f", "b", opts({ replayPath: "3:1", replayDump: "/tmp/d" }), siblings))
    .toEqual({ backend: "py:m:f", profile: "quick", checks: [{ id: "b", part: "pb", seed: 5, path: "3:1", dump: "/tmp/d" }] });
  expect(() => ChildResults.request("py:m:f", "z", opts({ replayPath: "0" }), siblings)).toThrow("no check 'z' on backend py:m:f in the plan");
});

test("ChildResults.keep: a run's results kept under each check's own seed, found again by a sibling; a missing result is an error", () => {
  const results = new ChildResults();
  const req = ChildResults.request("py:m:f", "a", opts(), siblings);
  expect(results.cached("a", opts({ seed: checkSeed(1, "a") }))).toBeUndefined();
  const got = new Map([["a", stubResult("a", "pass", "ok a", checkSeed(1, "a"))], ["c", stubResult("c", "fail", "bad c", checkSeed(1, "c"))]]);
  expect(results.keep(req, got, "a", opts({ seed: checkSeed(1, "a") })).message).toBe("ok a");
  // the sibling finds its result under its own seed, not under another's
  expect(results.cached("c", opts({ seed: checkSeed(1, "c") }))?.status).toBe("fail");
  expect(results.cached("c", opts({ seed: checkSeed(1, "a") }))).toBeUndefined();
  expect(() => new ChildResults().keep(req, new Map(), "a", opts())).toThrow("the py:m:f child process returned no result for a");
});

test("a child's time limit: the base and the allowance per check", () => {
  expect(limitMs({ baseMs: 60_000, perCheckMs: 3_000 }, 83)).toBe(309_000);
  expect(limitMs({ baseMs: 7_000, perCheckMs: 0 }, 83)).toBe(7_000);
});
