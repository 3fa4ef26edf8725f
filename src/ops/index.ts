/**
 * The tape ops of docs/spec/tape.md (the seed's TapeOp list, plus SumReduce and row L2
 * normalisation). Each is declared once; the exported function is the op.
 */
// chunk.ts first: its ops register first, and the registry's order is the catalogue's order.
export { chunkCoefficients, gateScale, rowScale, unitLowerSolve, type GateForm } from "./chunk.ts";
export { allOps, type OpDecl } from "./define.ts";
export * from "./linalg.ts";
export * from "./elementwise.ts";
export * from "./reduce.ts";
export * from "./row-norm.ts";
export * from "./shape.ts";
export * from "./nl.ts";
