/**
 * The storage-intermediates emulation of KDA, Comba, DPLR, GDN2 and gated Oja
 * (python/nlc_torch/rules.py: `_kda_stored`, `_comba_stored`, `_dplr_stored`, `_gdn2_stored`, `_gated_oja_stored`; docs/spec/precision.md#intermediates), the
 * yardstick of fla's chunked bf16 kernels declared `intermediates: "storage"`. Each stored form,
 * with nothing rounded, is the rule's own recurrence (f64, to 1e-12), and a stored form with a bug
 * planted (Comba's correction read with k, DPLR's low-rank read from the decayed state, KDA's
 * and gated Oja's decays and GDN2's erase gates on reversed channels) is not; in bf16 every output and gradient moves, by a bf16 rounding's
 * size (the marks reach every tensor) and no more. Skipped without PyTorch.
 */
import { expect, test } from "bun:test";
import { probeTorchSync } from "../oracle/torch-bridge.ts";
import { defaultPython, pythonEnv } from "../oracle/torch-process.ts";

const hasTorch = probeTorchSync().available;

const SCRIPT = `
import torch
from nlc_torch import rules as R
from nlc_torch.ref_inner import run_inner
torch.manual_seed(3)
N, T, d = 2, 6, 4
f64 = torch.float64
def unit(*s):
    x = torch.randn(*s, dtype=f64)
    return x / x.norm(dim=-1, keepdim=True)
base = {"k": unit(N, T, d), "v": torch.randn(N, T, d, dtype=f64), "q": unit(N, T, d), "theta": torch.rand(N, T, dtype=f64) * 0.9}
ext = {"kda": {"alpha": torch.rand(N, T, d, dtype=f64) * 0.2},
       "comba": {"alpha": torch.rand(N, T, dtype=f64) * 0.2, "p": unit(N, T, d)},
       "dplr": {"alpha": torch.rand(N, T, d, dtype=f64) * 0.2, "a": -unit(N, T, d) * 0.5, "b": unit(N, T, d) * 0.5}}
M0 = torch.randn(N, d, d, dtype=f64) * 0.3
dy, dM = torch.randn(N, T, d, dtype=f64), torch.randn(N, d, d, dtype=f64)
# drawn after the others', so that theirs stay as they were: a per-channel erase and write gate
ext["gdn2"] = {"alpha": torch.rand(N, T, d, dtype=f64) * 0.2, "theta": torch.rand(N, T, d, dtype=f64) * 0.9,
               "eta": torch.rand(N, T, d, dtype=f64)}
ext["gated_oja"] = {"alpha": torch.rand(N, T, d, dtype=f64) * 0.2, "v": torch.randn(N, T, d, dtype=f64) * 0.5}

def rel(a, b):
    return ((a - b).abs().max() / a.abs().max()).item()

for rule, e in ext.items():
    inp = {**base, **e}
    if rule == "dplr":
        inp.pop("theta")
    # the stored form itself, nothing rounded (store is the identity here), against the rule's form
    for s in range(N):
        k, v, q, al, st = inp["k"][s], inp["v"][s], inp["q"][s], inp["alpha"][s], {"M": M0[s]}
        g = {"alpha": al, "theta": inp.get("theta", torch.zeros(N, T, dtype=f64))[s]}
        if "eta" in inp:
            g["eta"] = inp["eta"][s]
        if rule == "kda":
            plain, stored = R._kda(k, v, q, None, g, None, st, {}), R._kda_stored(k, v, q, g, st)
            planted = R._kda_stored(k, v, q, {**g, "alpha": al.flip(-1)}, st)
        elif rule == "comba":
            p = inp["p"][s]
            plain, stored = R._comba(k, v, q, None, g, None, st, {}, p=p), R._comba_stored(k, v, q, p, g, st)
            planted = R._comba_stored(k, v, q, k, g, st)
        elif rule == "gdn2":
            plain, stored = R._gdn2(k, v, q, None, g, None, st, {}), R._gdn2_stored(k, v, q, g, st)
            planted = R._gdn2_stored(k, v, q, {**g, "theta": g["theta"].flip(-1)}, st)
        elif rule == "gated_oja":
            plain, stored = R._gated_oja(k, v, q, None, g, None, st, {}), R._gated_oja_stored(k, v, q, g, st)
            planted = R._gated_oja_stored(k, v, q, {**g, "alpha": al.flip(-1)}, st)
        else:
            a, b = inp["a"][s], inp["b"][s]
            plain, stored = R._dplr(k, v, q, None, g, None, st, {}, a=a, b=b), R._dplr_stored(k, v, q, a, b, g, st)
            planted = R._dplr_stored(k, v, q, a * (1 - al), b, g, st)
        same = max(rel(plain[0], stored[0]), rel(plain[1]["M"], stored[1]["M"]))
        off = rel(plain[0], planted[0])
        print(f"{rule} seq {s}: stored vs plain {same:.1e}, planted vs plain {off:.1e}")
        assert same < 1e-12, (rule, same)
        assert off > 1e-2, (rule, off)
    # in bf16: every tensor moves by a rounding's size
    plain = run_inner(rule, {"d": d, "seq_len": T}, "f32", inp, {"M": M0}, dy, {"M": dM})
    stored = run_inner(rule, {"d": d, "seq_len": T}, "f32", inp, {"M": M0}, dy, {"M": dM}, {"dtype": "bf16", "rounding": "nearest"})
    assert set(plain) == set(stored), (rule, sorted(plain), sorted(stored))
    for n in plain:
        r = rel(plain[n], stored[n])
        assert 1e-4 < r < 5e-2, (rule, n, r)
    print(f"{rule} bf16: {len(plain)} tensors, each moved")
print("ok")
`;

test.skipIf(!hasTorch)("KDA's, Comba's, DPLR's, GDN2's and gated Oja's stored forms are their rules' recurrences, a planted one is not, and in bf16 each tensor moves by a rounding", () => {
  const p = Bun.spawnSync({ cmd: [defaultPython({}), "-c", SCRIPT], env: pythonEnv(), stdout: "pipe", stderr: "pipe" });
  expect(p.stderr.toString()).toBe("");
  expect(p.stdout.toString()).toContain("dplr bf16: 9 tensors, each moved\ngdn2");
  expect(p.stdout.toString()).toContain("gdn2 bf16: 9 tensors, each moved\ngated_oja");
  expect(p.stdout.toString()).toContain("gated_oja bf16: 8 tensors, each moved\nok");
}, 120_000);
