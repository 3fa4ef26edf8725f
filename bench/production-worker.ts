/**
 * One batch element of bench/production-case.ts, in a worker thread: its H sequences drawn,
 * the kernel run on them (one ABI call of B = 1), then per sequence ref64, the plain reference's
 * yardstick and the summary the verdict needs (oracle/sequence-judge.ts), posted as each sequence
 * finishes; nothing of a sequence is kept once its summary is posted.
 */
import { parentPort, workerData } from "node:worker_threads";
import { symbolName } from "../ffi/abi.ts";
import { stateShapesOf } from "../ffi/backends.ts";
import { openKernelLib } from "../ffi/lib.ts";
import { tokenWidth, unpackState, unpackTokens } from "../cases/kernel-layout.ts";
import { comparedItems } from "../cases/kernel-tensors.ts";
import { kernelYardstick } from "../cases/kernel-phase.ts";
import { batchDy, batchInputs, batchState, byInput, declaredPrecision, requirePair, type Seq } from "../conformance/kernel-api.ts";
import { referenceRun } from "../oracle/kernel-reference.ts";
import type { PairCase, SeqTensors } from "../oracle/kernel-case.ts";
import { summarise } from "../oracle/sequence-judge.ts";
import { ruleByKey } from "../src/rules/index.ts";
import { roundTo } from "../src/precision.ts";
import { Rng } from "../src/rng.ts";
import { AUX_INPUT_NAMES, gateShape, rowsOf, type InnerInputs, type RuleConfig } from "../src/rules/types.ts";
import { Tensor, cast } from "../src/tensor.ts";

export interface WorkerJob {
  lib: string;
  rule: string;
  b: number;
  T: number;
  H: number;
  d: number;
  C: number;
  /** The sequences judged: the first `judged` of the H (the kernel runs on all of them). */
  judged: number;
  /** Per sequence: its seed and gate levels (α_t, θ_t are drawn within ±50% of them). */
  specs: { d: number; seq_len: number; seed: number; alpha: number; theta: number }[];
}
export type WorkerMessage =
  | { kind: "kernel"; b: number; seconds: number }
  | { kind: "seq"; n: number; seconds: number; summaries: ReturnType<typeof summarise>[] }
  | { kind: "done"; b: number };

const job = workerData as WorkerJob;
const decl = ruleByKey(job.rule);
const lib = openKernelLib(job.lib, stateShapesOf);
// One guarded run per kernel call: the guards still catch writes into an input or past a buffer's
// end, but not the determinism rerun (C5's hazard probes, docs/spec/hazards.md), which ran every call
// twice and held both runs' copies of every [T, H, d] tensor at once: the kernel phase's peak memory
// grew with the rule's input count (docs/spec/conformance.md#production-new-rules).
lib.hazards = { ...lib.hazards, rerun: false };
const pair = requirePair(lib, decl.key);
const precision = declaredPrecision(lib, symbolName(decl.key, "forward"));
const post = (m: WorkerMessage) => parentPort!.postMessage(m);

/**
 * Sequence n's inputs, drawn directly (not through a level: the case generator's level forward would
 * cost two reference runs per sequence): k and q rows on the unit sphere (the level normalises
 * them, D1), v and dy in U(−1, 1), α_t and θ_t around the sequence's gate levels, a random initial
 * state (the rule's sampler) and d(final state) in U(−1, 1); rounded once to the kernel's storage
 * and state dtypes, held in f32 (the f64 copies are cast per sequence when it is judged).
 */
function drawSequence(spec: WorkerJob["specs"][number], n: number): Seq {
  const { d, seq_len: T } = spec, rng = new Rng(spec.seed);
  const t32 = (shape: number[], draw: () => number, dt = precision.storage) => {
    const t = new Tensor("f32", shape);
    for (let i = 0; i < t.size; i++) t.data[i] = roundTo(dt, draw());
    return t;
  };
  // n rows of d per token (rowsOf: Gated DeltaProduct's k, v and θ have n_h), each key row on its own sphere
  const cfg = cfgOf(spec), rows = (n: string) => rowsOf(decl, cfg, n);
  const unitRows = (n: number) => {
    const t = new Tensor("f32", [T, n * d]), row = new Float64Array(d);
    for (let r = 0; r < T * n; r++) {
      for (let i = 0; i < d; i++) row[i] = rng.uniform(-1, 1);
      const norm = Math.hypot(...row) || 1;
      for (let i = 0; i < d; i++) t.data[r * d + i] = roundTo(precision.storage, row[i]! / norm);
    }
    return t;
  };
  // every ABI input of the rule, by its declaration: keys (k, q, the auxiliary inputs p, a, b and
  // Trellis's level input row x, which S_K reads as a key) on the unit sphere; v and Atlas's ω in
  // U(−1, 1), as the chunk cases draw ω (cases/chunk-case.ts); each gate per token or per key
  // channel (gateShape); each input with its declared rows per token. (x in U(−1, 1) at d = 128 has
  // |x|² ≈ 43, so Trellis's step θ|x|² on S_K passed 2 and the sequence diverged, reference to 1e51.)
  const level: Record<string, number> = { alpha: spec.alpha, theta: spec.theta, eta: 0.6 };
  const in32: Record<string, Tensor> = {};
  // k, q, v first (Delta's draws stay those of the Delta-only bench), then the rest in ABI order
  for (const n of [...new Set(["k", "q", "v", ...pair.abi.inputs])].filter((x) => (pair.abi.inputs as readonly string[]).includes(x))) {
    if (n === "v" || n === "omega") in32[n] = t32([T, rows(n) * d], () => rng.uniform(-1, 1));
    else if (n === "k" || n === "q" || n === "x" || (AUX_INPUT_NAMES as readonly string[]).includes(n)) in32[n] = unitRows(rows(n));
    else if (n === "alpha" || n === "theta" || n === "eta") {
      const g = level[n]!;
      in32[n] = t32(gateShape(decl, n) === "channel" ? [T, d] : rows(n) > 1 ? [T, rows(n)] : [T], () => g * rng.uniform(0.5, 1.5));
    } else throw new Error(`production-worker: rule ${decl.key}: no draw for its ABI input '${n}'`);
  }
  in32.x ??= in32.k!;
  // every state of the rule (Titans' momentum S beside M), by the rule's sampler; d(final state) of
  // each in U(−1, 1), in the ABI's state order (a rule with M alone draws as the Delta-only bench did)
  const st32 = decl.randomState(cfg, "f32", () => rng.next());
  for (const t of Object.values(st32)) for (let i = 0; i < t.size; i++) t.data[i] = roundTo(precision.state, t.data[i]!);
  const dy = t32([T, d], () => rng.uniform(-1, 1));
  const dFinal32: Record<string, Tensor> = {};
  for (const name of pair.abi.state) dFinal32[name] = t32([...st32[name]!.shape], () => rng.uniform(-1, 1), precision.state);
  return { T, h: n % job.H, cfg, in32: in32 as unknown as InnerInputs, in64: undefined as never, st32, st64: undefined as never, dy32: dy, dy64: undefined as never, dFinal32, dFinal64: undefined as never };
}
/** d, T and every hyperparameter of the rule at its declared default (Gated DeltaProduct: n_h = 2). */
const cfgOf = (s: WorkerJob["specs"][number]): RuleConfig => {
  const cfg: Record<string, number | string> = { d: s.d, seq_len: s.seq_len };
  for (const [name, h] of Object.entries(decl.hyper)) cfg[name] = h.default;
  return cfg as RuleConfig;
};
const seqs: Seq[] = job.specs.map(drawSequence);
const cfg = seqs[0]!.cfg;
const shape = { B: 1, T: job.T, H: job.H, d: job.d };

// the kernel calls once the parent says this batch element's turn has come: one batch element's
// calls at a time (the library runs one launch at a time anyway), so only one worker holds the
// calls' guarded copies of its [T, H, d] tensors at once
await new Promise<void>((resolve) => parentPort!.once("message", () => resolve()));
const t0 = performance.now();
let inputs = batchInputs(pair.abi, seqs, shape, cfg);
const st0 = batchState(pair.abi.state, seqs.map((s) => s.st32));
const f = pair.forward(shape, job.C, cfg, inputs, st0);
// the call's transient copies (guarded uploads, downloads, the NaN-filled workspace) collected
// before the backward makes its own: the two workers' kernel calls are the run's peak memory
Bun.gc(true);
const g = pair.backward(shape, job.C, cfg, inputs, st0, f.ws, batchDy(seqs, shape), batchState(pair.abi.state, seqs.map((s) => s.dFinal32)));
f.ws.free();
// the batched inputs are the per-sequence ones packed (the judge reads those): not kept
inputs = undefined as never;
Bun.gc(true);
const grads = byInput(g.grads);
post({ kind: "kernel", b: job.b, seconds: (performance.now() - t0) / 1000 });
// judge once the parent says both batch elements have their kernel outputs (the phases are timed apart)
await new Promise<void>((resolve) => parentPort!.once("message", () => resolve()));

const f64 = (r: Readonly<Record<string, Tensor>>) => Object.fromEntries(Object.entries(r).map(([k, t]) => [k, cast(t, "f64")]));
for (let h = 0; h < job.judged; h++) {
  const t1 = performance.now();
  const s = seqs[h]!;
  const c: PairCase = { inputs: f64(s.in32 as unknown as Record<string, Tensor>) as never, state: f64(s.st32), dy: cast(s.dy32, "f64"), dFinal: f64(s.dFinal32) };
  const kern: SeqTensors = {
    y: unpackTokens(f.y, shape, job.d, h, new Float32Array(job.T * job.d)),
    state: Object.fromEntries(Object.entries(f.state).map(([k, a]) => [k, unpackState(a, job.H, h)])),
    grads: Object.fromEntries(Object.entries(grads).map(([k, a]) => [k, unpackTokens(a, shape, tokenWidth(pair.abi, k, job.d, cfg), h, new Float32Array(job.T * tokenWidth(pair.abi, k, job.d, cfg)))])),
    dState0: Object.fromEntries(Object.entries(g.dState0).map(([k, a]) => [k, unpackState(a, job.H, h)])),
  };
  const r64 = referenceRun(decl, false, c, cfg, "both");
  // the yardstick of a native kernel in C5 (cases/kernel-phase.ts): the plain reference on the f32 copies
  const r32 = kernelYardstick({ decl, frozen: false, seqs: [s], cfg, reference: { phases: "both" }, precision })([r64])[0]!;
  const n = job.b * job.H + h;
  const items = comparedItems([kern], [r64], [r32], false, "abi", true).map((it) => ({ ...it, seq: n }));
  seqs[h] = undefined as never;
  post({ kind: "seq", n, seconds: (performance.now() - t1) / 1000, summaries: items.map(summarise) });
}
post({ kind: "done", b: job.b });
