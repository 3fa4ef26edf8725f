/** C0 inputs: an op's declared sampler driven by fast-check, so its cases shrink like any other. */
import * as fc from "fast-check";
import type { Draw, OpDecl, OpSample } from "../src/ops/define.ts";

/** fast-check's generator as the reference's `Draw`. */
function drawFrom(g: fc.GeneratorValue): Draw {
  return {
    int: (min, max) => g(fc.integer, { min, max }),
    real: (min, max) => g(fc.double, { min, max, noNaN: true }),
    bool: () => g(fc.boolean),
    ints: (length, min, max) => g(fc.array, fc.integer({ min, max }), { minLength: length, maxLength: length }),
    shape: (minRank, maxRank, maxDim) => g(fc.array, fc.integer({ min: 1, max: maxDim }), { minLength: minRank, maxLength: maxRank }),
  };
}

/** The arbitrary over an op's valid cases (shapes, value domains, attributes). */
export function opSampleArb<A>(op: OpDecl<A>): fc.Arbitrary<OpSample<A>> {
  return fc.gen().map((g) => op.sample(drawFrom(g)));
}
