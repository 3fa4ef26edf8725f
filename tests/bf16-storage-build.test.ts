/**
 * The bf16-storage build (docs/spec/kernel-abi.md#bf16-storage) is, bit for bit, "the inputs in
 * bf16, the pure-f32 kernels, the outputs rounded to bf16": for every pair and frozen read of the
 * library, the cpu-bf16 build given bf16 inputs returns exactly the cpu-f32 build's outputs (given
 * the same values in f32) rounded to bf16 to nearest-even (src/precision.ts roundTo, written
 * independently of the kernels' bit trick), and exactly its f32 states. A frozen read with chosen
 * state values pins the rounding's corners: ties both ways, overflow, NaNs whose payload fills the
 * dropped half (the NaN fill pattern among them).
 *
 * Library memory of the cpu-emu builds is host memory, so the bf16 side writes and reads its
 * buffers in place (bun:ffi toArrayBuffer) and calls the kernels through callRaw.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { toArrayBuffer } from "bun:ffi";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { ABI, signature, tokenElems, type KernelFn, type RuleAbi, type Shape } from "../ffi/abi.ts";
import { stateShapesOf } from "../ffi/backends.ts";
import { buildLib } from "../ffi/build.ts";
import { openKernelLib } from "../ffi/lib.ts";
import type { Arrays, KernelLib } from "../ffi/lib-types.ts";
import { roundTo } from "../src/precision.ts";
import { ROOT } from "../paths.ts";
import { Rng } from "../src/rng.ts";
import { ruleByKey } from "../src/rules/index.ts";
import { withDefaults } from "../src/rules/level-params.ts";
import type { RuleConfig } from "../src/rules/types.ts";

let f32: KernelLib, bf16: KernelLib;

beforeAll(async () => {
  f32 = openKernelLib((await buildLib("cpu-f32")).path, stateShapesOf);
  bf16 = openKernelLib((await buildLib("cpu-bf16")).path, stateShapesOf);
}, 600_000);

const f32Bits = (x: number) => new Uint32Array(new Float32Array([x]).buffer)[0]!;
/** The bf16 bits of x (already bf16-representable or rounded here), via the reference rounding. */
const bf16Bits = (x: number) => f32Bits(roundTo("bf16", x)) >>> 16;
const widen = (h: number) => new Float32Array(new Uint32Array([h << 16]).buffer)[0]!;

/** Values already representable in bf16, so both builds see the same inputs. */
function bf16Values(n: number, rng: Rng, lo: number, hi: number): Float32Array {
  return Float32Array.from({ length: n }, () => roundTo("bf16", rng.uniform(lo, hi)));
}

const SHAPE: Shape = { B: 2, T: 5, H: 2, d: 8 };

function configOf(rule: string): RuleConfig {
  return withDefaults(ruleByKey(rule), { d: SHAPE.d, seq_len: SHAPE.T });
}

/** Element count of a parameter: a state (f32 in both builds) or a per-token tensor / gate (bf16 storage). */
function sizer(a: RuleAbi, cfg: RuleConfig): (name: string) => { n: number; state: boolean } {
  const shapes = stateShapesOf(a.rule, cfg);
  return (name) => {
    const bare = name.replace(/_0$/, "");
    const st = a.state.includes(bare) ? bare : bare.startsWith("d") && a.state.includes(bare.slice(1)) ? bare.slice(1) : null;
    if (st !== null) return { n: SHAPE.B * SHAPE.H * shapes[st]!.reduce((x, y) => x * y, 1), state: true };
    const token = name === "y" || name === "dy" || name === "dq" ? "q" : name.startsWith("d") && name !== "d" ? name.slice(1) : name;
    return { n: tokenElems(a, token, SHAPE, cfg), state: false };
  };
}

/**
 * One call of the bf16 library with the given f32 values (bf16-representable for storage inputs):
 * storage inputs go in as bf16 bits, outputs come back as raw bits (Uint16Array for storage,
 * Uint32Array for states); `ws` is the workspace pointer to reuse (the forward's, for its backward).
 */
function callBf16(a: RuleAbi, fn: KernelFn, cfg: RuleConfig, given: Record<string, Float32Array | null>, ws: number | null):
  Record<string, Uint16Array | Uint32Array> {
  const size = sizer(a, cfg);
  const mem = bf16.memory;
  const owned: number[] = [];
  const ptrs: Record<string, number | null> = {};
  const outs: Record<string, Uint16Array | Uint32Array> = {};
  const buffer = (n: number, state: boolean) => {
    const bytes = n * (state ? 4 : 2);
    const p = mem.alloc(bytes);
    owned.push(p);
    const u8 = new Uint8Array(toArrayBuffer(p, 0, bytes));
    u8.fill(0xff); // NaN in either dtype, as the harness fills outputs
    return { p, view: state ? new Uint32Array(u8.buffer, u8.byteOffset, n) : new Uint16Array(u8.buffer, u8.byteOffset, n) };
  };
  try {
    for (const p of signature(a, fn)) {
      if (p.kind === "in" || p.kind === "in?") {
        const arr = given[p.name];
        if (arr === undefined) throw new Error(`${fn}: ${p.name} not given`);
        if (arr === null) {
          ptrs[p.name] = null;
          continue;
        }
        const { n, state } = size(p.name);
        expect(arr.length).toBe(n);
        const b = buffer(n, state);
        // states by their bits (a NaN's payload survives), storage as the bf16 bits of the value
        if (state) b.view.set(new Uint32Array(arr.buffer, arr.byteOffset, n));
        else for (let i = 0; i < n; i++) b.view[i] = bf16Bits(arr[i]!);
        ptrs[p.name] = b.p;
      } else if (p.kind === "out") {
        const { n, state } = size(p.name);
        const b = buffer(n, state);
        ptrs[p.name] = b.p;
        outs[p.name] = b.view;
      } else if (p.kind === "ws") ptrs[p.name] = ws;
    }
    if (fn.startsWith("frozen")) (bf16.frozen(a.rule) as Exclude<ReturnType<KernelLib["frozen"]>, string>).callRaw(fn as never, SHAPE, cfg, ptrs);
    else (bf16.pair(a.rule) as Exclude<ReturnType<KernelLib["pair"]>, string>).callRaw(fn as never, SHAPE, 1, cfg, ptrs);
    // copy out before the buffers are freed
    return Object.fromEntries(Object.entries(outs).map(([k, v]) => [k, v.slice()]));
  } finally {
    for (const p of owned) mem.free(p);
  }
}

/** Every element of the bf16 build's output equals the f32 build's, rounded to bf16 (storage) or bit-identical (state). */
function mismatches(name: string, got: Uint16Array | Uint32Array, want: Float32Array): string[] {
  const bad: string[] = [];
  for (let i = 0; i < want.length; i++) {
    const w = want[i]!;
    if (got instanceof Uint32Array) {
      if (got[i] !== f32Bits(w)) bad.push(`${name}[${i}]: state bits ${got[i]!.toString(16)}, f32 build ${f32Bits(w).toString(16)}`);
    } else if (Number.isNaN(w) ? !Number.isNaN(widen(got[i]!)) : got[i] !== bf16Bits(w)) {
      bad.push(`${name}[${i}]: bf16 ${got[i]!.toString(16)} (${widen(got[i]!)}), f32 build ${w} rounds to ${bf16Bits(w).toString(16)}`);
    }
  }
  return bad.slice(0, 5);
}

function wsAlloc(bytes: number): { ptr: number | null; free(): void } {
  if (bytes === 0) return { ptr: null, free() {} };
  const p = bf16.memory.nanBuffer(Math.ceil(bytes / 4));
  return { ptr: p, free: () => bf16.memory.free(p) };
}

/** The rules with a kernel pair in the build (`cuda/<key>.cu`; a pair is optional, docs/contributing.md#adding-a-rule). */
const PAIRED = ABI.filter((a) => existsSync(join(ROOT, "cuda", `${a.rule}.cu`)));

describe("bf16-storage build", () => {
  test("nlk_dtypes: bf16 storage, f32 state, f32 accumulate (the f32 build: f32 throughout)", () => {
    for (const a of PAIRED) {
      expect(bf16.dtypes(`nlk_${a.rule}_forward`)).toEqual({ storage: "bf16", state: "f32", accumulate: "f32" });
      expect(f32.dtypes(`nlk_${a.rule}_forward`)).toEqual({ storage: "f32", state: "f32", accumulate: "f32" });
    }
  });

  for (const a of PAIRED) {
    test(`${a.rule}: forward and backward = the f32 build with inputs and outputs in bf16`, () => {
      const pairF = f32.pair(a.rule);
      if (typeof pairF === "string") throw new Error(pairF);
      const cfg = configOf(a.rule);
      const size = sizer(a, cfg);
      const rng = new Rng(0xbf16 + a.rule.length);
      const inputs: Arrays = Object.fromEntries(a.inputs.map((n) => [n, /alpha|theta|eta/.test(n) ? bf16Values(size(n).n, rng, 0.05, 0.5) : bf16Values(size(n).n, rng, -1, 1)]));
      // states are f32 in both builds: values that bf16 could not hold
      const state0: Arrays = Object.fromEntries(a.state.map((s) => [s, Float32Array.from({ length: size(s).n }, () => Math.fround(rng.uniform(-0.3, 0.3)))]));
      const dy = bf16Values(size("y").n, rng, -1, 1);
      const dFinal: Arrays = Object.fromEntries(a.state.map((s) => [s, Float32Array.from({ length: size(s).n }, () => Math.fround(rng.uniform(-1, 1)))]));

      const fwd = pairF.forward(SHAPE, 1, cfg, inputs, state0);
      const bwd = pairF.backward(SHAPE, 1, cfg, inputs, state0, fwd.ws, dy, a.state.length > 0 ? dFinal : null);
      fwd.ws.free();

      const ws = wsAlloc(pairF.workspaceBytes(SHAPE, 1, cfg));
      try {
        const st0 = Object.fromEntries(a.state.map((s) => [`${s}_0`, state0[s]!]));
        const f = callBf16(a, "forward", cfg, { ...inputs, ...st0 }, ws.ptr);
        const dst = Object.fromEntries(a.state.map((s) => [`d${s}`, dFinal[s]!]));
        const b = callBf16(a, "backward", cfg, { ...inputs, ...st0, dy, ...dst }, ws.ptr);
        const bad = [
          ...mismatches("y", f.y!, fwd.y),
          ...a.state.flatMap((s) => mismatches(s, f[s]!, fwd.state[s]!)),
          ...a.grads.flatMap((g) => mismatches(g, b[g]!, bwd.grads[g]!)),
          ...a.state.flatMap((s) => mismatches(`d${s}_0`, b[`d${s}_0`]!, bwd.dState0[s]!)),
        ];
        expect(bad).toEqual([]);
        // a check that compares nothing but zeros proves nothing: the outputs carry real values
        expect(fwd.y.some((x) => Math.abs(x) > 1e-3)).toBe(true);
      } finally {
        ws.free();
      }
    });

    if (a.frozen) {
      test(`${a.rule}: frozen read = the f32 build with q, y, dy, dq in bf16`, () => {
        const fr = f32.frozen(a.rule);
        if (typeof fr === "string") throw new Error(fr);
        const cfg = configOf(a.rule);
        const size = sizer(a, cfg);
        const rng = new Rng(0xf0 + a.rule.length);
        const q = bf16Values(size("q").n, rng, -1, 1), dy = bf16Values(size("y").n, rng, -1, 1);
        const state: Arrays = Object.fromEntries(a.state.map((s) => [s, Float32Array.from({ length: size(s).n }, () => Math.fround(rng.uniform(-0.5, 0.5)))]));
        const fw = fr.forward(SHAPE, cfg, q, state);
        const bw = fr.backward(SHAPE, cfg, q, state, fw.ws, dy);
        fw.ws.free();
        const ws = wsAlloc(fr.workspaceBytes(SHAPE, cfg));
        try {
          const f = callBf16(a, "frozen_forward", cfg, { q, ...state }, ws.ptr);
          const b = callBf16(a, "frozen_backward", cfg, { q, ...state, dy }, ws.ptr);
          const bad = [
            ...mismatches("y", f.y!, fw.y), ...mismatches("dq", b.dq!, bw.dq),
            ...a.state.flatMap((s) => mismatches(`d${s}`, b[`d${s}`]!, bw.dState[s]!)),
          ];
          expect(bad).toEqual([]);
        } finally {
          ws.free();
        }
      });
    }
  }

  test("rounding corners: ties to even both ways, overflow to inf, a NaN stays NaN", () => {
    // Delta's frozen read y = M q with q = e_0 returns column 0 of the f32 state M: its values are
    // narrowed to bf16 exactly as chosen
    const a = ABI.find((r) => r.rule === "delta")!;
    const cfg = configOf("delta");
    const d = SHAPE.d;
    const corners: [number, number][] = [
      [0x3f808000, 0x3f80], // tie, even below: down
      [0x3f818000, 0x3f82], // tie, odd below: up
      [0x3f808001, 0x3f81], // just above the tie: up
      [0x3f80ffff, 0x3f81], // rounds up
      [0x7f7fffff, 0x7f80], // the largest f32 overflows bf16: +inf
      [0xff7fffff, 0xff80], // and -inf
      [0x00000001, 0x0000], // the smallest subnormal: +0
      [0x3f7fffff, 0x3f80], // carry into the exponent
    ];
    const M = new Float32Array(SHAPE.B * SHAPE.H * d * d);
    const asF32 = (bits: number) => new Float32Array(new Uint32Array([bits]).buffer)[0]!;
    for (let n = 0; n < SHAPE.B * SHAPE.H; n++) {
      for (let i = 0; i < d; i++) M[n * d * d + i * d] = asF32(corners[i % corners.length]![0]);
    }
    const q = new Float32Array(tokenElems({}, "q", SHAPE));
    for (let i = 0; i < q.length; i += d) q[i] = 1;
    const fr = f32.frozen("delta");
    if (typeof fr === "string") throw new Error(fr);
    const ws = wsAlloc(fr.workspaceBytes(SHAPE, cfg));
    const y = callBf16(a, "frozen_forward", cfg, { q, M }, ws.ptr).y as Uint16Array;
    for (let i = 0; i < y.length; i++) expect(y[i]!.toString(16)).toBe(corners[(i % d) % corners.length]![1].toString(16));
    // NaNs whose payload fills the dropped half (all ones: the harness's NaN fill, and the GPU's
    // canonical 0x7fffffff): adding the rounding increment would carry out of them, to 0 and -0.
    // Arithmetic keeps a NaN operand's payload (x86), so y = M q carries them out as they are.
    const bits = new Uint32Array(M.buffer);
    bits[0] = 0xffffffff;
    bits[d] = 0x7fffffff;
    const y2 = callBf16(a, "frozen_forward", cfg, { q, M }, ws.ptr).y as Uint16Array;
    expect([widen(y2[0]!), widen(y2[1]!)]).toEqual([Number.NaN, Number.NaN]);
    ws.free();
  });
});
