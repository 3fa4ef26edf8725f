/**
 * A C5 batch's time limit grows with the profile (conformance/kernel/native/spawn.ts): the regime profile's 83
 * checks of the pure-f32 build took up to 600 s on a shared two-core machine, and the limit the
 * default allowance gave them (309 s) ended them as false `error`s (regime sweep, seeds 4 and 5).
 */
import { expect, test } from "bun:test";
import { batchTimeout } from "../conformance/kernel/native/spawn.ts";
import { limitMs } from "../harness/child-process.ts";
import type { Profile } from "../harness/check.ts";
import type { Environment } from "../environment.ts";

/** The limit of a batch of `n` checks. */
const batchTimeoutMs = (n: number, profile: Profile, env: Environment): number => limitMs(batchTimeout(profile, undefined, env), n);

test("a regime batch of 83 checks may take well over the 600 s measured; quick and default keep their limit", () => {
  expect(batchTimeoutMs(83, "regime", {})).toBeGreaterThanOrEqual(2.5 * 600_000);
  expect(batchTimeoutMs(83, "deep", {})).toBeGreaterThan(batchTimeoutMs(83, "default", {}));
  expect(batchTimeoutMs(83, "default", {})).toBe(309_000);
  expect(batchTimeoutMs(83, "quick", {})).toBe(309_000);
  // NLC_KERNEL_TIMEOUT (seconds) overrides every profile
  expect(batchTimeoutMs(83, "regime", { NLC_KERNEL_TIMEOUT: "7" })).toBe(7_000);
});
