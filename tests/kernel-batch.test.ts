/**
 * The kernel batch record (cases/kernel-batch.ts): packing and unpacking every ABI layout, the
 * report's tensor names built from typed keys, and the judge's items (oracle/kernel-judge.ts) —
 * a tensor the kernel does not return, or returns scaled by 1%, fails the case.
 */
import { expect, test } from "bun:test";
import { packedLengths } from "../cases/kernel-regimes.ts";
import { cuSeqlens, packPackedTokens, packStates, packTokens, tokenWidth, unpackPackedTokens, unpackState, unpackTokens } from "../cases/kernel-layout.ts";
import { ShapeTally } from "../cases/kernel-shapes.ts";
import { comparedItems, entries, kernelGradKeys, tensorName, type TensorKey } from "../cases/kernel-tensors.ts";
import { abiOf } from "../ffi/abi.ts";
import { flashCompare } from "../oracle/kernel-judge.ts";
import type { SeqTensors } from "../oracle/kernel-case.ts";

test("pack and unpack: per-token [B, T, H, w] and per-sequence state blocks round-trip, sequence n = b·H + h", () => {
  const dims = { B: 2, T: 3, H: 2 }, w = 4, N = dims.B * dims.H;
  const parts = Array.from({ length: N }, (_, n) => Float64Array.from({ length: dims.T * w }, (_, i) => 100 * n + i));
  const packed = packTokens(parts, dims, w, new Float64Array(N * dims.T * w));
  // sequence n = 3 is b = 1, h = 1: its token t = 2, element 1 sits at ((1·T + 2)·H + 1)·w + 1
  expect(packed[((1 * dims.T + 2) * dims.H + 1) * w + 1]).toBe(300 + 2 * w + 1);
  for (let n = 0; n < N; n++) expect([...unpackTokens(packed, dims, w, n, new Float64Array(dims.T * w))]).toEqual([...parts[n]!]);
  const states = packStates(parts, new Array<number>(N * dims.T * w));
  for (let n = 0; n < N; n++) expect([...unpackState(Float64Array.from(states), N, n)]).toEqual([...parts[n]!]);
  expect([tokenWidth({}, "alpha", 5), tokenWidth({}, "dtheta", 5), tokenWidth({}, "k", 5), tokenWidth({}, "dk", 5), tokenWidth({}, "y", 5)]).toEqual([1, 1, 5, 5, 5]);
  // a channel gate (KDA's alpha) and its gradient have one value per key channel
  const kda = { channelGates: ["alpha"] as const };
  expect([tokenWidth(kda, "alpha", 5), tokenWidth(kda, "dalpha", 5), tokenWidth(kda, "theta", 5), tokenWidth(kda, "dtheta", 5)]).toEqual([5, 5, 1, 1]);
});

test("packed batches: [1, ΣL, H, w] with sequence i at cu_seqlens[i], sequence n = i·H + h, round-trip", () => {
  const lengths = [3, 1, 2], H = 2, w = 2, cu = cuSeqlens(lengths);
  expect(cu).toEqual([0, 3, 4, 6]);
  const parts = lengths.flatMap((L, i) => Array.from({ length: H }, (_, h) => Float64Array.from({ length: L * w }, (_, j) => 100 * (i * H + h) + j)));
  const packed = packPackedTokens(parts, lengths, H, w, new Float64Array(cu[3]! * H * w));
  // packed sequence 2, head 1 (n = 5): its token 1, element 0 sits at ((cu[2] + 1)·H + 1)·w
  expect(packed[((cu[2]! + 1) * H + 1) * w]).toBe(500 + w);
  parts.forEach((p, n) => expect([...unpackPackedTokens(packed, lengths, H, w, n, new Float64Array(p.length))]).toEqual([...p]));
});

test("packed shapes: a length-1 sequence among two or more lengths straddling the chunk; the tally names them", () => {
  expect(packedLengths(16, [3, 0], 1)).toEqual([33, 1, 15]);
  expect(packedLengths(16, [1, 2, 0], 9)).toEqual([16, 17, 15, 1]);
  expect(packedLengths(64, [0, 1, 2, 3], 0)).toEqual([1, 63, 64, 65, 129]);
  const tally = new ShapeTally();
  tally.add({ B: 2, T: 17, H: 2, d: 4 }, 16);
  tally.addPacked({ lengths: [15, 1, 33], H: 2, d: 3 }, 16);
  // chunk boundaries: 2·2·1 (the T = 17 batch) + 2·(0 + 0 + 2) (the packed sequences on their own)
  expect(tally.shapes).toEqual({ T: [17, 49], d: [3, 4], H: [2, 2], B: [1, 2], chunk_boundaries_crossed: 8, packed: { batches: 1, sequences: [3, 3], lengths: [1, 15, 33] } });
});

test("tensor names: the report's strings, from typed keys", () => {
  const keys: TensorKey[] = [{ part: "y" }, { part: "state", name: "M" }, { part: "grad", name: "alpha" }, { part: "dState0", name: "M" }];
  expect(keys.map((k) => tensorName(k, false))).toEqual(["y", "M", "dalpha", "dM_0"]);
  expect(keys.map((k) => tensorName(k, true))).toEqual(["y", "M", "dalpha", "dM"]);
  expect(keys.map((k) => tensorName(k, false, "py"))).toEqual(["y", "state M", "dalpha", "dM (initial state)"]);
  const g = kernelGradKeys(abiOf("delta")!, false);
  expect([...g.tokens, ...g.states].map((k) => tensorName(k, false))).toEqual([...abiOf("delta")!.grads, "dM_0"]);
});

function seq(scale: number, omit?: string): SeqTensors {
  const v = (k: number) => Float64Array.from({ length: 6 }, (_, i) => scale * (k + Math.sin(i + k)));
  const grads: Record<string, Float64Array> = { k: v(1), alpha: v(2) };
  if (omit !== undefined) delete grads[omit];
  return { y: v(3), state: { M: v(4) }, grads, dState0: { M: v(5) } };
}

test("the judge on the typed record: exact passes; a missing output or a 1% scale fails, naming the tensor", () => {
  const ref = [seq(1), seq(1)];
  const judge = (kernel: SeqTensors[], all: boolean) => flashCompare(comparedItems(kernel, ref, ref, false, "abi", all), new Set(), "k");
  const ok = judge([seq(1), seq(1)], true);
  expect(ok.ok).toBe(true);
  expect(Object.keys((ok.details as { tensors: object }).tensors)).toEqual(entries(seq(1)).map(([k]) => tensorName(k, false)));
  const missing = judge([seq(1), seq(1, "alpha")], true);
  expect(missing.ok).toBe(false);
  expect(missing.message).toBe("k does not return dalpha, which the reference computes");
  const scaled = seq(1);
  scaled.dState0.M = Float64Array.from(scaled.dState0.M!, (x) => x * 1.01);
  const off = judge([seq(1), scaled], true);
  expect(off.ok).toBe(false);
  expect(off.message).toMatch(/^dM_0 \(sequence 1\): max \|kernel - ref64\|/);
});
