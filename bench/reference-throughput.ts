/**
 * Throughput of the f64 reference at production head sizes (docs/spec/conformance.md#regime,
 * docs/spec/precision.md#fast-pair): a rule's pair, forward then backward with dy and d(final
 * state), on one sequence at d = 64, 128, 256, in one run, for Delta and the rules after it
 * (KDA, Comba, DPLR, Gated DeltaProduct; `--rules` picks), the inputs drawn by the declaration
 * (every inner input the pair reads, each gate per token or per key channel, each input with its
 * declared rows per token: Gated DeltaProduct at its default n_h = 2):
 *   - ref       the reference pair (src/rules/<rule>.ts);
 *   - fast      the judge's fast pair (oracle/matrix-fast.ts, oracle/fast-pairs/; bitwise equal to ref), f64, where the
 *               rule has one (judgePair: the others are judged with the reference pair itself);
 *   - numpy     a plain numpy per-token loop of the same forward and backward (/usr/bin/python3, or NLC_TORCH_PYTHON);
 *   - torch     the same loop in PyTorch f64 eager (one thread);
 *   - yardstick the plain reference of an f32-summing kernel as the judge runs it for Delta
 *               (fast pair, f32 storage and sums, plainOrders(f32, plainRuns(delta)) runs), and
 *               before (Delta only): the ten runs (natural, reversed, eight random-rounding) of the reference pair;
 *               for a rule without a fast pair the yardstick is those ten runs, timed once.
 * Wall clock and CPU time (process.cpuUsage; the machine is shared: CPU time moves less), best of
 * REPS after one untimed call, the candidates alternating (the old yardstick: one timed call). GFLOP/s use one nominal count, 7d² per token forward and 14d² backward, so ratios are
 * ratios of times. Python's times are its process's CPU time (time.process_time) and wall clock.
 * The nominal count is Delta's for every rule (the others do the same matrix-vector work per token
 * within a d² or two; Gated DeltaProduct does n_h delta steps per token, about twice Delta's work
 * at n_h = 2), so across rules too the GFLOP/s are inverse times.
 * Usage: npx bun bench/reference-throughput.ts [--quick] [--no-old] [--rules delta,kda,…] (default: every rule with a numpy loop)
 */
import { PLAIN_RUNS, plainOrders, plainRuns, RANDOM_RUNS } from "../oracle/plain-reference.ts";
import { withAccumulate } from "../src/precision.ts";
import { ruleByKey } from "../src/rules/index.ts";
import { Rng } from "../src/rng.ts";
import { Tensor, cast } from "../src/tensor.ts";
import { gateShape, rowsOf, type GateName, type InnerInputs, type InnerPair, type RuleDecl, type State } from "../src/rules/types.ts";
import { hasFastPair, judgePair } from "../oracle/matrix-fast.ts";
import { childEnvironment, environment } from "../environment.ts";

const quick = process.argv.includes("--quick"), old = !process.argv.includes("--no-old");
const REPS = quick ? 1 : 3;
const SIZES: { d: number; T: number }[] = [{ d: 64, T: quick ? 64 : 512 }, { d: 128, T: quick ? 32 : 256 }, { d: 256, T: quick ? 16 : 64 }];
const PY = environment().NLC_TORCH_PYTHON ?? "/usr/bin/python3";
const flops = (d: number, T: number) => 21 * d * d * T;

interface Timing {
  wall: number;
  cpu: number;
}

function tensor(shape: number[], rng: Rng, lo: number, hi: number): Tensor {
  const t = new Tensor("f64", shape);
  rng.fill(t.data as Float64Array, lo, hi);
  return t;
}

/** One sequence's inputs: every inner input the rule's pair reads, by its declaration. */
function caseOf(decl: RuleDecl, d: number, T: number) {
  const rng = new Rng(7);
  const s = 1 / Math.sqrt(d);
  const gate: Record<GateName, [number, number]> = { alpha: [0.05, 0.95], theta: [0.05, 0.8], eta: [0.3, 0.9] };
  // the rule's hyperparameters at their defaults; an input's rows per token by the declaration (tokenRows)
  const cfg: Record<string, number | string> = { d, seq_len: T };
  for (const [name, h] of Object.entries(decl.hyper)) cfg[name] = h.default;
  const rows = (n: string) => rowsOf(decl, cfg as never, n);
  const inp: Record<string, Tensor> = { k: tensor([T, rows("k") * d], rng, -s, s), v: tensor([T, rows("v") * d], rng, -s, s), q: tensor([T, d], rng, -s, s) };
  for (const n of decl.auxInputs ?? []) inp[n] = tensor([T, d], rng, -s, s);
  for (const g of decl.gates) inp[g] = tensor(gateShape(decl, g) === "channel" ? [T, d] : rows(g) > 1 ? [T, rows(g)] : [T], rng, ...gate[g]);
  inp.x = inp.k!;
  return { inp: inp as unknown as InnerInputs, st: { M: tensor([d, d], rng, -s, s) } as State, dy: tensor([T, d], rng, -1, 1), dFinal: { M: tensor([d, d], rng, -1, 1) } as State, cfg: cfg as never };
}

type Case = ReturnType<typeof caseOf>;

function f32Case(c: Case): Case {
  const m = (r: Readonly<Record<string, Tensor | undefined>>) => Object.fromEntries(Object.entries(r).map(([k, t]) => [k, cast(t!, "f32")]));
  return { inp: m(c.inp as never) as never, st: m(c.st), dy: cast(c.dy, "f32"), dFinal: m(c.dFinal), cfg: c.cfg };
}

/** Best of `reps` timed calls of each function, after one untimed call each; the calls alternate, so a change in the machine's load falls on all of them. */
function bestOf(reps: number, fns: (() => void)[]): Timing[] {
  const out = fns.map(() => ({ wall: Infinity, cpu: Infinity }));
  for (const fn of fns) fn();
  for (let r = 0; r < reps; r++) {
    fns.forEach((fn, i) => {
      const c0 = process.cpuUsage(), t0 = performance.now();
      fn();
      const c = process.cpuUsage(c0);
      out[i]!.wall = Math.min(out[i]!.wall, (performance.now() - t0) / 1000);
      out[i]!.cpu = Math.min(out[i]!.cpu, (c.user + c.system) / 1e6);
    });
  }
  return out;
}

const once = (pair: InnerPair<string>, c: Case) => {
  const f = pair.forward(c.inp, c.st, c.cfg);
  pair.backward(f.saved, c.inp, c.dy, c.cfg, c.dFinal);
};

const PRELUDE = `
import sys, time
d, T, reps, lib = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
if lib == "torch":
    import torch
    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(7)
    U = lambda lo, hi, *shape: torch.rand(*shape, generator=g, dtype=torch.float64) * (hi - lo) + lo
    outer, zeros_like, zeros, dot, fsum = torch.outer, torch.zeros_like, lambda n: torch.zeros(n, dtype=torch.float64), torch.dot, torch.sum
else:
    import numpy as np
    r = np.random.default_rng(7)
    U = lambda lo, hi, *shape: r.uniform(lo, hi, shape)
    outer, zeros_like, zeros, dot, fsum = np.outer, np.zeros_like, np.zeros, np.dot, np.sum
s = d ** -0.5
k, v, q = U(-s, s, T, d), U(-s, s, T, d), U(-s, s, T, d)
a, th = U(0.05, 0.95, T), U(0.05, 0.8, T)
M0, dy, dF = U(-s, s, d, d), U(-1, 1, T, d), U(-1, 1, d, d)
# the other rules' inputs: a second key P (Comba), the low-rank vectors A, B (DPLR), a channel gate AC (KDA, DPLR)
P, A, B, AC = U(-s, s, T, d), U(-s, s, T, d), U(-s, s, T, d), U(0.05, 0.95, T, d)
# Gated DeltaProduct's NH keys, values and steps per token (its default n_h)
NH = 2
KH, VH, THH = U(-s, s, T, NH, d), U(-s, s, T, NH, d), U(0.05, 0.8, T, NH)
best_wall, best_cpu = 1e9, 1e9
for _ in range(reps):
    t0, c0 = time.perf_counter(), time.process_time()
`;
const POSTLUDE = `
    best_wall, best_cpu = min(best_wall, time.perf_counter() - t0), min(best_cpu, time.process_time() - c0)
print(best_wall, best_cpu)
`;

/** Per rule, the per-token loop of its forward and backward (the sheets' recurrences, written out by hand). */
const LOOPS: Record<string, string> = {
  delta: `
    Ms, es, ys = [M0], [], []
    M = M0
    for t in range(T):
        e = M @ k[t] - v[t]
        M = (1 - a[t]) * M - th[t] * outer(e, k[t])
        ys.append(M @ q[t]); Ms.append(M); es.append(e)
    D = dF.clone() if lib == "torch" else dF.copy()
    dk, dv, dq, da, dth = zeros_like(k), zeros_like(v), zeros_like(q), zeros(T), zeros(T)
    for t in range(T - 1, -1, -1):
        Mt, Mn, e = Ms[t], Ms[t + 1], es[t]
        D += outer(dy[t], q[t]); dq[t] = Mn.T @ dy[t]
        Dk = D @ k[t]; de = -th[t] * Dk
        dth[t] = -dot(e, Dk); da[t] = -fsum(D * Mt)
        dk[t] = -th[t] * (D.T @ e) + Mt.T @ de; dv[t] = -de
        D = (1 - a[t]) * D + outer(de, k[t])
`,
  kda: `
    Ms, es, ys = [M0], [], []
    M = M0
    for t in range(T):
        Md = M * (1 - AC[t])
        e = Md @ k[t] - v[t]
        M = Md - th[t] * outer(e, k[t])
        ys.append(M @ q[t]); Ms.append(M); es.append(e)
    D = dF.clone() if lib == "torch" else dF.copy()
    dk, dv, dq, da, dth = zeros_like(k), zeros_like(v), zeros_like(q), zeros_like(AC), zeros(T)
    for t in range(T - 1, -1, -1):
        Mt, Mn, e, w = Ms[t], Ms[t + 1], es[t], 1 - AC[t]
        D += outer(dy[t], q[t]); dq[t] = Mn.T @ dy[t]
        Dk = D @ k[t]; de = -th[t] * Dk
        dth[t] = -dot(e, Dk)
        dk[t] = -th[t] * (D.T @ e) + (Mt * w).T @ de; dv[t] = -de
        G = D + outer(de, k[t])
        da[t] = -fsum(G * Mt, 0); D = G * w
`,
  comba: `
    Ms, es, ys = [M0], [], []
    M = M0
    for t in range(T):
        e = M @ P[t] - v[t]
        M = (1 - a[t]) * M - th[t] * outer(e, k[t])
        ys.append(M @ q[t]); Ms.append(M); es.append(e)
    D = dF.clone() if lib == "torch" else dF.copy()
    dk, dv, dq, dp, da, dth = zeros_like(k), zeros_like(v), zeros_like(q), zeros_like(P), zeros(T), zeros(T)
    for t in range(T - 1, -1, -1):
        Mt, Mn, e = Ms[t], Ms[t + 1], es[t]
        D += outer(dy[t], q[t]); dq[t] = Mn.T @ dy[t]
        Dk = D @ k[t]; de = -th[t] * Dk
        dth[t] = -dot(e, Dk); da[t] = -fsum(D * Mt)
        dk[t] = -th[t] * (D.T @ e); dp[t] = Mt.T @ de; dv[t] = -de
        D = (1 - a[t]) * D + outer(de, P[t])
`,
  dplr: `
    Ms, us, ys = [M0], [], []
    M = M0
    for t in range(T):
        u = M @ A[t]
        M = M * (1 - AC[t]) + outer(u, B[t]) + outer(v[t], k[t])
        ys.append(M @ q[t]); Ms.append(M); us.append(u)
    D = dF.clone() if lib == "torch" else dF.copy()
    dk, dv, dq, dA, dB, da = zeros_like(k), zeros_like(v), zeros_like(q), zeros_like(A), zeros_like(B), zeros_like(AC)
    for t in range(T - 1, -1, -1):
        Mt, Mn, u = Ms[t], Ms[t + 1], us[t]
        D += outer(dy[t], q[t]); dq[t] = Mn.T @ dy[t]
        du = D @ B[t]; dB[t] = D.T @ u; dv[t] = D @ k[t]; dk[t] = D.T @ v[t]
        dA[t] = Mt.T @ du; da[t] = -fsum(D * Mt, 0)
        D = D * (1 - AC[t]) + outer(du, A[t])
`,
  gated_delta_product: `
    Ms, Ps, es, ys = [M0], [], [], []
    M = M0
    for t in range(T):
        Pj = (1 - a[t]) * M
        Pt, et = [], []
        for j in range(NH):
            e = Pj @ KH[t, j] - VH[t, j]
            Pt.append(Pj); et.append(e)
            Pj = Pj - THH[t, j] * outer(e, KH[t, j])
        M = Pj
        ys.append(M @ q[t]); Ms.append(M); Ps.append(Pt); es.append(et)
    D = dF.clone() if lib == "torch" else dF.copy()
    dk, dv, dq, da, dth = zeros_like(KH), zeros_like(VH), zeros_like(q), zeros(T), zeros_like(THH)
    for t in range(T - 1, -1, -1):
        Mt, Mn = Ms[t], Ms[t + 1]
        D += outer(dy[t], q[t]); dq[t] = Mn.T @ dy[t]
        for j in range(NH - 1, -1, -1):
            Pj, e, kk = Ps[t][j], es[t][j], KH[t, j]
            Dk = D @ kk; de = -THH[t, j] * Dk
            dth[t, j] = -dot(e, Dk)
            dk[t, j] = -THH[t, j] * (D.T @ e) + Pj.T @ de; dv[t, j] = -de
            D = D + outer(de, kk)
        da[t] = -fsum(D * Mt); D = (1 - a[t]) * D
`,
};

function pySeconds(rule: string, lib: "numpy" | "torch", d: number, T: number): Timing | string {
  const p = Bun.spawnSync({ cmd: [PY, "-c", PRELUDE + LOOPS[rule]! + POSTLUDE, String(d), String(T), String(REPS), lib], stdout: "pipe", stderr: "pipe", env: childEnvironment({ OMP_NUM_THREADS: "1", OPENBLAS_NUM_THREADS: "1", MKL_NUM_THREADS: "1" }) });
  if (p.exitCode !== 0) return `${lib} loop unavailable (${PY}): ${p.stderr.toString().trim().split("\n").pop()}`;
  const [wall, cpu] = p.stdout.toString().trim().split(/\s+/).map(Number);
  return { wall: wall!, cpu: cpu! };
}

const gf = (d: number, T: number, t: Timing) => `${(flops(d, T) / t.wall / 1e9).toFixed(2)}/${(flops(d, T) / t.cpu / 1e9).toFixed(2)}`;
const ratio = (a: Timing, b: Timing | string) => (typeof b === "string" ? "—" : `${(a.wall / b.wall).toFixed(2)}/${(a.cpu / b.cpu).toFixed(2)}`);

const rulesArg = process.argv.indexOf("--rules");
// default: every rule with a numpy loop (LOOPS)
const RULES = (rulesArg < 0 ? Object.keys(LOOPS).join(",") : (process.argv[rulesArg + 1] ?? "")).split(",").filter((r) => r !== "");
if (RULES.length === 0) {
  console.error(`reference-throughput: --rules needs a comma-separated list of rules (${Object.keys(LOOPS).join(",")})`);
  process.exit(2);
}
for (const r of RULES) if (!(r in LOOPS)) {
  console.error(`reference-throughput: --rules: no numpy loop for rule '${r}' (known: ${Object.keys(LOOPS).join(", ")})`);
  process.exit(2);
}

console.log(`reference throughput, forward + backward, one sequence, best of ${REPS}; every figure wall/cpu (nominal 21d² FLOP per token)`);
console.log("ratios are times: below 1 means ours is faster; BLAS and torch run one thread");
for (const rule of RULES) {
  const decl = ruleByKey(rule), fastOf = hasFastPair(decl);
  for (const { d, T } of SIZES) {
    const c = caseOf(decl, d, T), c32 = f32Case(c);
    const fast = judgePair(decl);
    const runs = plainOrders("f32", plainRuns(decl));
    const yardFn = () => { for (const o of runs) withAccumulate("f32", () => once(fast, c32), o); };
    // without a fast pair the yardstick is ten runs of the reference pair: timed once, as `before`
    const [ref, fst, yard0] = bestOf(REPS, fastOf ? [() => once(decl.inner, c), () => once(fast, c), yardFn] : [() => once(decl.inner, c)]) as [Timing, Timing?, Timing?];
    const yard = yard0 ?? timeOnce(yardFn);
    const np = pySeconds(rule, "numpy", d, T), th = pySeconds(rule, "torch", d, T);
    console.log(`${rule}: d = ${d}, T = ${T}`);
    console.log(`  ref (src/rules/${rule}.ts)   ${ref.wall.toFixed(3)}/${ref.cpu.toFixed(3)} s   GFLOP/s ${gf(d, T, ref)}   ref/numpy ${ratio(ref, np)}   ref/torch ${ratio(ref, th)}`);
    if (fst !== undefined) console.log(`  fast (oracle/matrix-fast)  ${fst.wall.toFixed(3)}/${fst.cpu.toFixed(3)} s   GFLOP/s ${gf(d, T, fst)}   fast/numpy ${ratio(fst, np)}   fast/torch ${ratio(fst, th)}   fast/ref ${ratio(fst, ref)}`);
    else console.log("  fast: none (the judge runs the reference pair)");
    for (const [name, t] of [["numpy loop", np], ["torch f64 eager", th]] as const) {
      console.log(typeof t === "string" ? `  ${name}: ${t}` : `  ${name.padEnd(26)} ${t.wall.toFixed(3)}/${t.cpu.toFixed(3)} s   GFLOP/s ${gf(d, T, t)}`);
    }
    const judged = fst ?? ref;
    console.log(`  yardstick, f32 sums (${runs.length} run${runs.length === 1 ? "" : "s"} of the ${fastOf ? "fast" : "reference"} pair${fastOf ? "" : ", timed once"})   ${yard.wall.toFixed(3)}/${yard.cpu.toFixed(3)} s   yardstick/${fastOf ? "fast" : "ref"} ${ratio(yard, judged)}`);
    if (old && rule === "delta") {
      const before = timeOnce(() => { for (const o of plainOrders("f32", PLAIN_RUNS)) withAccumulate("f32", () => once(decl.inner, c32), o); });
      console.log(`  yardstick before (${2 + RANDOM_RUNS} runs of the reference pair)   ${before.wall.toFixed(3)}/${before.cpu.toFixed(3)} s   before/ref ${ratio(before, ref)}   before/now ${ratio(before, yard)}`);
    }
  }
}

function timeOnce(fn: () => void): Timing {
  const c0 = process.cpuUsage(), t0 = performance.now();
  fn();
  const cc = process.cpuUsage(c0);
  return { wall: (performance.now() - t0) / 1000, cpu: (cc.user + cc.system) / 1e6 };
}
