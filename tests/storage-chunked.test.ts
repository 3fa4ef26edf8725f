/**
 * The chunked storage yardstick (docs/spec/precision.md#intermediates-chunked): the exact chunked
 * (WY) form of Delta and Gated Delta in python/nlc_torch/chunk_stored.py is the per-token rule,
 * reassociated: unrounded in f64 it agrees with the per-token reference (y, final state, every
 * gradient) to rounding, for T within, at and across chunk boundaries and a decay of exactly 0
 * (α = 1); rounded, it differs by what bf16 storage costs. The rules it covers are the ones the
 * session sends it (CHUNKED_STORED_RULES), and a bad chunk size or rule is an error naming the field.
 * Skipped without PyTorch.
 */
import { expect, test } from "bun:test";
import { join } from "node:path";
import { ROOT } from "../paths.ts";
import { probeTorchSync } from "../oracle/torch-bridge.ts";
import { CHUNKED_STORED_RULES, storedChunks } from "../conformance/kernel/python/session.ts";

const hasTorch = probeTorchSync().available;

function py(lines: string[]): string {
  const p = Bun.spawnSync({ cmd: [process.env.NLC_TORCH_PYTHON ?? "/usr/bin/python3", "-c", lines.join("\n")],
    cwd: join(ROOT, "python"), stdout: "pipe", stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(p.stderr.toString());
  return p.stdout.toString().trim();
}

const SETUP = [
  "import contextlib, json, torch",
  "import nlc_torch.ref_inner as RI",
  "from nlc_torch.chunk_stored import CHUNKED_RULES",
  "def case(T, d=5, N=2, seed=0):",
  "    g = torch.Generator().manual_seed(seed)",
  "    r = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)",
  "    inp = {'k': torch.nn.functional.normalize(r(N, T, d), dim=-1), 'v': r(N, T, d), 'q': r(N, T, d),",
  "           'alpha': torch.rand(N, T, generator=g, dtype=torch.float64) * 0.5, 'theta': torch.rand(N, T, generator=g, dtype=torch.float64)}",
  "    if T > 2: inp['alpha'][0, 2] = 1.0",
  "    return inp, {'M': r(N, d, d)}, r(N, T, d), {'M': r(N, d, d)}",
  "def rel(a, b): return max(float((a[n] - b[n]).abs().max() / max(1.0, float(a[n].abs().max()))) for n in a)",
];

test.skipIf(!hasTorch)("the chunked form, unrounded, is the per-token rule; bf16 storage moves it by what bf16 costs", () => {
  const out = JSON.parse(py([...SETUP,
    "res = {}",
    "for key in CHUNKED_RULES:",
    "    for T, C in ((1, 4), (7, 4), (16, 16), (17, 16), (33, 8), (5, 64)):",
    "        inp, st, dy, ds = case(T)",
    "        ref = RI.run_inner(key, {'d': 5, 'seq_len': T}, 'f64', inp, st, dy, ds)",
    "        low = RI.run_inner(key, {'d': 5, 'seq_len': T}, 'f64', inp, st, dy, ds, {'dtype': 'bf16', 'rounding': 'nearest', 'chunk': C})",
    "        keep = RI.storing",
    "        RI.storing = lambda *a, **k: contextlib.nullcontext()   # the marks as identity: the form alone",
    "        try: exact = RI.run_inner(key, {'d': 5, 'seq_len': T}, 'f64', inp, st, dy, ds, {'dtype': 'bf16', 'rounding': 'nearest', 'chunk': C})",
    "        finally: RI.storing = keep",
    "        assert sorted(exact) == sorted(ref), sorted(exact)",
    "        res[f'{key} T={T} C={C}'] = [rel(ref, exact), rel(ref, low)]",
    "print(json.dumps(res))",
  ])) as Record<string, [number, number]>;
  expect(Object.keys(out).length).toBe(12);
  for (const [id, [exact, low]] of Object.entries(out)) {
    expect(`${id}: ${exact < 1e-13 ? "exact" : exact}`).toBe(`${id}: exact`);
    // bf16 (8 significant bits) storage: visible, and of bf16's size
    expect(low).toBeGreaterThan(1e-4);
    expect(low).toBeLessThan(0.1);
  }
}, 120_000);

test.skipIf(!hasTorch)("the rules sent in chunked form are the ones the reference has; a bad chunk size or rule is an error naming the field", () => {
  const out = py([...SETUP,
    "print(json.dumps(sorted(CHUNKED_RULES)))",
    "inp, st, dy, ds = case(3)",
    "for key, chunk in (('delta', 0), ('delta', True), ('delta', '64'), ('kda', 4)):",
    "    try: RI.run_inner(key, {'d': 5, 'seq_len': 3}, 'f32', inp, st, dy, ds, {'dtype': 'bf16', 'rounding': 'nearest', 'chunk': chunk})",
    "    except Exception as e: print(str(e).split(';')[0])",
  ]).split("\n");
  expect(JSON.parse(out[0]!)).toEqual([...CHUNKED_STORED_RULES].sort());
  expect(out.slice(1, 4)).toEqual(["0", "True", "'64'"].map((v) => `intermediates.chunk: expected a positive integer chunk size, got ${v}`));
  expect(out[4]).toContain("the torch reference has no chunked stored form of kda");
  expect(storedChunks("delta", [64])).toEqual([64]);
  expect(storedChunks("gated_delta", [16, 64])).toEqual([16, 64]);
  expect(storedChunks("delta", null)).toEqual([undefined]);
  expect(storedChunks("kda", [64])).toEqual([undefined]);
}, 120_000);

/**
 * The false alarm it removes: a correct chunked bf16 DeltaNet in chunks of 64 (deltanet_lowprec.py's
 * chunk64_delta_bf16, storing where fla's chunk_delta_rule stores) at the saturated corner (β = 1 − 2⁻⁸
 * on every token, T = 67, d = 4: the WY system's condition ≈ 40). Its dM₀ error is above twice the
 * per-token stored yardstick's (the flash bound without the floor: a failure) and within twice the
 * chunked one's; its y error equals the chunked yardstick's rounded to nearest, bit for bit (the same
 * rounding points). Yardsticks: nearest and 4 stochastic runs, per element the farthest from f64.
 */
test.skipIf(!hasTorch)("at β ≈ 1 over a 64-token chunk the per-token yardstick fails a correct chunked bf16 kernel; the chunked one does not", () => {
  const out = JSON.parse(py([
    "import json, sys, torch",
    "sys.path.insert(0, '../examples/py-kernels')",
    "import deltanet_lowprec as lp",
    "from nlc_torch.ref_inner import run_inner",
    "res = {}",
    "for seed in (1, 2):",
    "    T, d = 67, 4",
    "    g = torch.Generator().manual_seed(seed)",
    "    bf = lambda x: x.to(torch.bfloat16)",
    "    q, k = (bf(torch.nn.functional.normalize(torch.randn(1, T, 1, d, generator=g), dim=-1)) for _ in range(2))",
    "    v, beta = bf(torch.randn(1, T, 1, d, generator=g)), bf(torch.full((1, T, 1), 1 - 2 ** -8))",
    "    h0 = torch.randn(1, 1, d, d, generator=g)",
    "    do, dht = bf(torch.randn(1, T, 1, d, generator=g)), torch.randn(1, 1, d, d, generator=g)",
    "    leaves = [x.clone().requires_grad_(True) for x in (q, k, v, beta, h0)]",
    "    o, ht = lp.chunk64_delta_bf16(*leaves[:4], scale=1.0, initial_state=leaves[4], output_final_state=True)",
    "    torch.autograd.backward([o, ht], [do, dht])",
    "    kern = {'y': o[0, :, 0].double(), 'grads.state.M': leaves[4].grad[0, 0].double().T}",
    "    inp = {'k': k[0, :, 0].double()[None], 'v': v[0, :, 0].double()[None], 'q': q[0, :, 0].double()[None],",
    "           'alpha': torch.zeros(1, T, dtype=torch.float64), 'theta': beta[0, :, 0].double()[None]}",
    "    st, dy, ds = {'M': h0[0, 0].double().T[None]}, do[0, :, 0].double()[None], {'M': dht[0, 0].double().T[None]}",
    "    cfg = {'d': d, 'seq_len': T}",
    "    ref = run_inner('delta', cfg, 'f64', inp, st, dy, ds)",
    "    f32 = lambda r: {a: b.float() for a, b in r.items()}",
    "    def plain(chunk, runs):",
    "        w = {n: 0.0 for n in kern}",
    "        for rnd in ['nearest'] + list(range(1, runs + 1)):",
    "            r = run_inner('delta', cfg, 'f32', f32(inp), f32(st), dy.float(), f32(ds), {'dtype': 'bf16', 'rounding': rnd, **({'chunk': chunk} if chunk else {})})",
    "            for n in kern: w[n] = max(w[n], float((r[n][0].double() - ref[n][0]).abs().max()))",
    "        return w",
    "    err = {n: float((kern[n] - ref[n][0]).abs().max()) for n in kern}",
    "    per_token, chunked, nearest = plain(None, 4), plain(64, 4), plain(64, 0)",
    "    res[seed] = {'dM0_per_token': err['grads.state.M'] / (2 * per_token['grads.state.M']),",
    "                 'dM0_chunked': err['grads.state.M'] / (2 * chunked['grads.state.M']), 'y_same': err['y'] == nearest['y']}",
    "print(json.dumps(res))",
  ])) as Record<string, { dM0_per_token: number; dM0_chunked: number; y_same: boolean }>;
  for (const [seed, r] of Object.entries(out)) {
    expect(`seed ${seed}: per-token ${r.dM0_per_token > 1 ? "fails" : "passes"}, chunked ${r.dM0_chunked <= 1 ? "passes" : "fails"}, y ${r.y_same}`)
      .toBe(`seed ${seed}: per-token fails, chunked passes, y true`);
  }
}, 300_000);
