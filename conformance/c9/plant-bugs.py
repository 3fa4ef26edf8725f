#!/usr/bin/env python3
"""Plants known bugs, one at a time, and checks that conformance/c9/cross-check.ts flags each one.

    python3 conformance/c9/plant-bugs.py [INDEX ...]

Each bug is a one-place textual patch of a torch file (python/nlc_torch) or of the TypeScript
reference; the file is restored byte for byte after the run (also on error or Ctrl-C). The
script refuses to touch a file that has uncommitted changes. Exit code 1 when a bug goes
unnoticed (the cross-check exits 0 with the bug in place).
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # conformance/c9/ -> the root
BUGS = [
  # (id, file, old, new, cross-check args)
  ("torch: gates from [v;k] instead of [k;v]", "python/nlc_torch/rules.py",
   "c = torch.cat([k, v], dim=1)                      # c_t = [k_t; v_t], k first",
   "c = torch.cat([v, k], dim=1)", ["--no-model", "--cases", "3"]),
  ("torch: no 1/sqrt(k) at k=4", "python/nlc_torch/model.py",
   "return total * (1.0 / math.sqrt(k)) if k > 2 else total", "return total * (1.0 / math.sqrt(k)) if k > 4 else total", ["--no-rules"]),
  ("torch: 2*lambda instead of lambda in Trellis", "python/nlc_torch/rules.py",
   "SK_new = (1 - al) * SK - th * (torch.outer(ek, x[t]) + lk * SK)", "SK_new = (1 - al) * SK - th * (torch.outer(ek, x[t]) + 2 * lk * SK)",
   ["--no-model", "--rule", "trellis", "--cases", "6"]),
  ("torch: straight-through sign flipped (NL_Hecate's surrogate)", "python/nlc_torch/model.py",
   "return dy, (dy * y).sum().reshape(1)", "return dy, -(dy * y).sum().reshape(1)", ["--no-rules"]),
  ("torch: silu'' omitted in the MLP rules (repo parity)", "python/nlc_torch/rules.py",
   "    u = (W2.t() @ gg) * silu_prime(a)", "    u = (W2.t() @ gg) * silu_prime(a).detach()",
   ["--no-model", "--rule", "moneta,yaad,memora", "--cases", "4"]),
  ("torch: frozen read L2-normalises q", "python/nlc_torch/rules.py",
   '    return _frozen_read(key, X @ P["W_Q"].t(), st, cfg)', '    return _frozen_read(key, l2_rows(X @ P["W_Q"].t()) if key in NORMALIZE_KQ else X @ P["W_Q"].t(), st, cfg)',
   ["--no-model", "--rule", "delta.frozen,titans.frozen", "--cases", "3"]),
  ("torch: init hash not rounded to f32", "python/nlc_torch/rules.py",
   'f32 = struct.unpack("<f", struct.pack("<f", float(u)))[0]', "f32 = float(u)",
   ["--no-model", "--rule", "moneta,yaad,memora,lattice", "--cases", "4"]),
  ("torch: MEMORA reads after the write", "python/nlc_torch/rules.py",
   "        ys.append(_mlp_read(W1, W2, q[t]))                # read BEFORE write\n        G1, G2, _ = _mlp_inner_grad(W1, W2, k[t], v[t], lambda e: e)   # L2 bias, no factor 2\n        W1 = torch.softmax(al * _logc(W1) - th * G1, dim=1)\n        W2 = torch.softmax(al * _logc(W2) - th * G2, dim=1)",
   "        G1, G2, _ = _mlp_inner_grad(W1, W2, k[t], v[t], lambda e: e)\n        W1 = torch.softmax(al * _logc(W1) - th * G1, dim=1)\n        W2 = torch.softmax(al * _logc(W2) - th * G2, dim=1)\n        ys.append(_mlp_read(W1, W2, q[t]))",
   ["--no-model", "--rule", "memora", "--cases", "3"]),
  ("torch: softplus with torch's threshold-20 cut (D6)", "python/nlc_torch/rules.py",
   "    return -F.logsigmoid(-x)", "    return F.softplus(x)", ["--cases", "6"]),
  ("torch: cross entropy averaged over all positions incl. padding (D12)", "python/nlc_torch/model.py",
   "                                                     torch.tensor([targets[t] for t in valid], dtype=torch.long))",
   "                                                     torch.tensor([targets[t] for t in valid], dtype=torch.long)) * len(valid) / s",
   ["--no-rules"]),
  ("torch: Titans momentum carried across model steps (D7)", "python/nlc_torch/model.py",
   "        for n in STEP_LOCAL_STATE.get(rule, ()):   # momentum restarts at zero every step (D7)\n            st[n] = torch.zeros(*state_shapes(rule, cfgs[l])[n], dtype=DT)",
   "        for n in STEP_LOCAL_STATE.get(rule, ()):\n            st[n] = 0.1 * st['M']",
   ["--no-rules", "--rule", "titans,atlas"]),
  ("torch: Lattice similarity write without the slot projection", "python/nlc_torch/rules.py",
   "            u = v[t] - (S @ v[t])[:, None] * S", "            u = v[t].expand_as(S)",
   ["--no-model", "--rule", "lattice", "--cases", "6"]),
  ("torch: Moneta L_q accumulator starts at N_q(W_0) instead of W_0", "python/nlc_torch/rules.py",
   "    A1, A2 = W1, W2            # A_0 = W_0 at the start of every call (README \"Fixture details\")",
   "    A1, A2 = W1, W2\n    if abs(lq - 2) >= 1e-6:\n        W1, W2 = lq_normalize(W1, lq), lq_normalize(W2, lq)",
   ["--no-model", "--rule", "moneta", "--cases", "4"]),
  ("TS: Hebbian backward drops d(alpha)", "src/rules/hebbian.ts",
   "dalpha[t] = -K.frob(D, 0, M, mt, dd);", "dalpha[t] = 0;",
   ["--rule", "hebbian,hebbian.frozen", "--cases", "3"]),
  ("TS: Lattice similarity write without the slot projection", "src/rules/lattice.ts",
   "    for (let j = 0; j < d; j++) out[j]! -= sv * S[si + j]!;", "    for (let j = 0; j < d; j++) out[j]! -= 0 * sv * S[si + j]!;",
   ["--no-model", "--rule", "lattice", "--cases", "6"]),
  ("TS: oracle backward misses 1/sqrt(k) at k=4", "oracle/level-stage.ts",
   "return new Tensor(dt, shape, c === null ? d : fill(dt, d.length, (i) => c * d[i]!));",
   "return new Tensor(dt, shape, c === null ? d : fill(dt, d.length, (i) => d[i]!));", ["--no-rules"]),
]


def run(args):
    p = subprocess.run(["./node_modules/.bin/bun", "conformance/c9/cross-check.ts", "--no-fixtures", *args], cwd=ROOT,
                       capture_output=True, text=True, timeout=600)
    return p.returncode, p.stdout + p.stderr


def main():
    only = sys.argv[1:]
    missed = 0
    for i, (bid, f, old, new, args) in enumerate(BUGS):
        if only and str(i) not in only:
            continue
        if subprocess.run(["git", "diff", "--quiet", "--", f], cwd=ROOT).returncode != 0:
            print(f"[{i}] {bid}: SKIPPED ({f} has uncommitted changes)")
            continue
        path = os.path.join(ROOT, f)
        with open(path) as fh:
            src = fh.read()
        if src.count(old) != 1:
            print(f"[{i}] {bid}: SKIPPED (patch site not found exactly once in {f})")
            continue
        try:
            with open(path, "w") as fh:
                fh.write(src.replace(old, new))
            rc, out = run(args)
        finally:
            with open(path, "w") as fh:
                fh.write(src)
        fails = "\n".join(line for line in out.splitlines() if "FAIL" in line)
        examples = re.findall(r"FAIL: ([^ ]+ [^ ;]+)", fails)
        last = out.strip().splitlines()[-1] if out.strip() else "(no output)"
        caught = rc == 1
        missed += 0 if caught else 1
        print(f"[{i}] {bid}: {'CAUGHT' if caught else 'MISSED'} (exit {rc}; {last}; e.g. {'; '.join(examples[:3])})")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
