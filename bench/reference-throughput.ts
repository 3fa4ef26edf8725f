/**
 * Throughput of the f64 reference at production head sizes (docs/spec/conformance.md#regime):
 * the Delta rule's reference pair (src/rules/delta.ts forward, then backward with dy and
 * d(final state)) on one sequence at d = 64, 128, 256, against a plain numpy per-token loop of the
 * same forward and backward on the same sizes, in the same run (/usr/bin/python3 with numpy, or
 * NLC_TORCH_PYTHON). Both are timed by wall clock, best of REPS; GFLOP/s use one nominal count for
 * both, 7d² per token forward (e = Mk − v, the update, y = Mq) and 14d² backward, so the ratio is
 * the ratio of times. The reference is not changed by this bench.
 * Usage: npx bun bench/reference-throughput.ts [--quick]
 */
import { ruleByKey } from "../src/rules/index.ts";
import { Rng } from "../src/rng.ts";
import { Tensor } from "../src/tensor.ts";
import type { InnerInputs, State } from "../src/rules/types.ts";

const quick = process.argv.includes("--quick");
const REPS = quick ? 1 : 3;
const SIZES: { d: number; T: number }[] = [{ d: 64, T: quick ? 64 : 256 }, { d: 128, T: quick ? 32 : 128 }, { d: 256, T: quick ? 16 : 64 }];
const PY = process.env.NLC_TORCH_PYTHON ?? "/usr/bin/python3";
const flops = (d: number, T: number) => 21 * d * d * T;

function tensor(shape: number[], rng: Rng, lo: number, hi: number): Tensor {
  const t = new Tensor("f64", shape);
  rng.fill(t.data as Float64Array, lo, hi);
  return t;
}

function oursSeconds(d: number, T: number): number {
  const decl = ruleByKey("delta");
  const rng = new Rng(7);
  const s = 1 / Math.sqrt(d);
  const inp = { k: tensor([T, d], rng, -s, s), v: tensor([T, d], rng, -s, s), q: tensor([T, d], rng, -s, s),
    alpha: tensor([T], rng, 0.05, 0.95), theta: tensor([T], rng, 0.05, 0.8) } as unknown as InnerInputs;
  const st: State = { M: tensor([d, d], rng, -s, s) };
  const dy = tensor([T, d], rng, -1, 1), dFinal: State = { M: tensor([d, d], rng, -1, 1) };
  const cfg = { d, seq_len: T } as never;
  let best = Infinity;
  for (let r = 0; r < REPS; r++) {
    const t0 = performance.now();
    const fw = decl.inner.forward(inp, st, cfg);
    decl.inner.backward(fw.saved, inp, dy, cfg, dFinal);
    best = Math.min(best, (performance.now() - t0) / 1000);
  }
  return best;
}

const NUMPY = `
import sys, time, numpy as np
d, T, reps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
r = np.random.default_rng(7); s = d ** -0.5
k, v, q = (r.uniform(-s, s, (T, d)) for _ in range(3))
a, th = r.uniform(0.05, 0.95, T), r.uniform(0.05, 0.8, T)
M0 = r.uniform(-s, s, (d, d)); dy = r.uniform(-1, 1, (T, d)); dF = r.uniform(-1, 1, (d, d))
best = 1e9
for _ in range(reps):
    t0 = time.perf_counter()
    Ms, es, ys = [M0], [], []
    M = M0
    for t in range(T):
        e = M @ k[t] - v[t]
        M = (1 - a[t]) * M - th[t] * np.outer(e, k[t])
        ys.append(M @ q[t]); Ms.append(M); es.append(e)
    D = dF.copy()
    dk, dv, dq, da, dth = (np.zeros_like(k), np.zeros_like(v), np.zeros_like(q), np.zeros(T), np.zeros(T))
    for t in range(T - 1, -1, -1):
        Mt, Mn, e = Ms[t], Ms[t + 1], es[t]
        D += np.outer(dy[t], q[t]); dq[t] = Mn.T @ dy[t]
        Dk = D @ k[t]; de = -th[t] * Dk
        dth[t] = -e @ Dk; da[t] = -np.sum(D * Mt)
        dk[t] = -th[t] * (D.T @ e) + Mt.T @ de; dv[t] = -de
        D = (1 - a[t]) * D + np.outer(de, k[t])
    best = min(best, time.perf_counter() - t0)
print(best)
`;

function numpySeconds(d: number, T: number): number | string {
  const p = Bun.spawnSync({ cmd: [PY, "-c", NUMPY, String(d), String(T), String(REPS)], stdout: "pipe", stderr: "pipe" });
  if (p.exitCode !== 0) return `numpy loop unavailable (${PY}): ${p.stderr.toString().trim().split("\n").pop()}`;
  return Number(p.stdout.toString().trim());
}

console.log(`reference throughput, delta forward + backward, one sequence, best of ${REPS} (nominal 21d² FLOP per token)`);
console.log("d     T     ours s    ours GFLOP/s   numpy s   numpy GFLOP/s   ours/numpy time");
for (const { d, T } of SIZES) {
  const ours = oursSeconds(d, T), np = numpySeconds(d, T);
  const g = (s: number) => (flops(d, T) / s / 1e9).toFixed(2);
  const row = typeof np === "string"
    ? `${d}`.padEnd(6) + `${T}`.padEnd(6) + ours.toFixed(4).padEnd(10) + g(ours).padEnd(15) + np
    : `${d}`.padEnd(6) + `${T}`.padEnd(6) + ours.toFixed(4).padEnd(10) + g(ours).padEnd(15) + np.toFixed(4).padEnd(10) + g(np).padEnd(16) + (ours / np).toFixed(2);
  console.log(row);
}
