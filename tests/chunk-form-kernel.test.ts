/**
 * A kernel pair that declares a chunk form is judged against the matching reference
 * (docs/spec/kernel-abi.md#chunk-form): the cpu-chunkgd build's Delta pair declares chunk-start GD
 * with C = 4 and passes C5's forward and backward against that reference; the same cases fail when
 * the sequential Delta pair declares chunk-start GD (the plant), and when the chunk-start GD pair
 * is judged as sequential.
 */
import { describe, expect, test } from "bun:test";
import { stateShapesOf } from "../ffi/backends.ts";
import { CHUNK_GD_BUILD_C, buildLib } from "../ffi/build.ts";
import { openKernelLib } from "../ffi/lib.ts";
import type { KernelLib } from "../ffi/lib-types.ts";
import type { AbiCaseSpec } from "../cases/kernel-batch.ts";
import { backwardCase, forwardCase } from "../conformance/kernel/native/phase-case.ts";
import { ruleByKey } from "../src/rules/index.ts";

const delta = ruleByKey("delta");
const ALPHA = ["low", "mid", "high"] as const, THETA = ["small", "large"] as const, STATE = ["init", "random"] as const;
// T >= 5: every case has a token whose error reads a chunk start other than its own state; every
// checkpoint interval of C5 (1, 4, 16), both heads counts, NULL upstream gradients now and then
const cases: AbiCaseSpec[] = Array.from({ length: 12 }, (_, i) => ({
  base: { d: 2 + (i % 7), seq_len: 5 + ((i * 5) % 16), hyper: {}, alpha: ALPHA[i % 3]!, theta: THETA[i % 2]!, state: STATE[(i >> 1) % 2]!, seed: 100 + i },
  B: 1 + (i % 2), H: 1 + ((i >> 2) % 2), C: [1, 4, 16][i % 3]!,
  extra: Array.from({ length: 5 }, (_, j) => ({ seed: 1000 + 10 * i + j, alpha: ALPHA[j % 3]!, theta: THETA[(i + j) % 2]!, state: STATE[j % 2]! })),
  dyNull: i % 5 === 4, dFinalNull: i % 4 === 3,
}));

function declaring(lib: KernelLib, kind: "sequential" | "chunk-start-gd", C: number): KernelLib {
  return { ...lib, chunkForm: () => ({ kind, C }) };
}

function outcomes(lib: KernelLib): { forward: boolean[]; backward: boolean[]; messages: string[] } {
  const forward: boolean[] = [], backward: boolean[] = [], messages: string[] = [];
  for (const k of cases) {
    const f = forwardCase(delta, false, lib, k, new Set());
    const b = backwardCase(delta, false, lib, k, new Set());
    forward.push(f.ok);
    backward.push(b.ok);
    for (const o of [f, b]) if (!o.ok && o.message !== undefined) messages.push(o.message);
  }
  return { forward, backward, messages };
}

describe("kernel chunk forms", async () => {
  const seq = openKernelLib((await buildLib("cpu")).path, stateShapesOf);
  const gd = openKernelLib((await buildLib("cpu-chunkgd")).path, stateShapesOf);

  test("the query: absent is sequential; the cpu-chunkgd build's Delta declares chunk-start GD", () => {
    expect(seq.chunkForm("delta")).toEqual({ kind: "sequential", C: 1 });
    expect(gd.chunkForm("delta")).toEqual({ kind: "chunk-start-gd", C: CHUNK_GD_BUILD_C });
    expect(gd.chunkForm("titans")).toEqual({ kind: "sequential", C: 1 });
  });

  test("the chunk-start GD pair passes forward and backward against the chunk-start GD reference", () => {
    const r = outcomes(gd);
    expect(r.messages).toEqual([]);
  });

  test("plant: the sequential pair declaring chunk-start GD fails", () => {
    const r = outcomes(declaring(seq, "chunk-start-gd", CHUNK_GD_BUILD_C));
    expect(r.forward.every((ok) => !ok)).toBe(true);
    expect(r.backward.every((ok) => !ok)).toBe(true);
    expect(r.messages[0]).toContain("reference: chunk-start GD, C = 4");
  });

  test("the chunk-start GD pair judged as sequential fails", () => {
    const r = outcomes(declaring(gd, "sequential", 1));
    expect(r.forward.every((ok) => !ok)).toBe(true);
  });
});
