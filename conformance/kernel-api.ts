/**
 * The kernel checks' public API, for code outside the suite's checks (bench/, fixtures/): the
 * batch of sequences a native kernel case is made of, running a native pair on it, its declared
 * precision, and C5's forward and backward cases. bench/ and fixtures/ import these from here and
 * never a check folder's modules (tests/layering.test.ts), so the check folders may be reorganised
 * behind this module without touching them.
 */
export { batchDy, batchInputs, batchState, sequencesOf, type KSpec, type Seq } from "./kernel/native/abi-case.ts";
export { byInput, declaredPrecision, runKernels } from "./kernel/native/backend.ts";
export { requirePair } from "./kernel/native/kernel-lib.ts";
export { backwardCase, forwardCase } from "./kernel/native/phase-case.ts";
