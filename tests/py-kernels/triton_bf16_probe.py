"""bf16 Triton arithmetic in Triton's interpreter against torch's bf16 on the CPU, with and without
the kernel host's support (python/nlc_torch/triton_cpu.py; tests/triton-cpu.test.ts). Prints one
JSON line: per operation, the largest |interpreted - torch| relative to max |torch|, before and
after the support is installed, whether a dynamic loop's variable has `.to` (fla's chunked kernels),
whether a builtin bound under the module's own name runs (fla's chunked DPLR: `gather = tl.gather`),
and the error an atomic bf16 add raises (null: none).

    TRITON_INTERPRET=1 python tests/py-kernels/triton_bf16_probe.py
"""
import json
import os
import sys

os.environ["TRITON_INTERPRET"] = "1"
import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))


@triton.jit
def ops(a_ptr, b_ptr, out_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    j = tl.arange(0, N)
    a = tl.load(a_ptr + i[:, None] * N + j[None, :])   # bf16, kept bf16
    b = tl.load(b_ptr + i[:, None] * N + j[None, :])
    tl.store(out_ptr + 0 * N * N + i[:, None] * N + j[None, :], a + b)
    tl.store(out_ptr + 1 * N * N + i[:, None] * N + j[None, :], a * b)
    tl.store(out_ptr + 2 * N * N + i[:, None] * N + j[None, :], a - b)
    tl.store(out_ptr + 3 * N * N + i[:, None] * N + j[None, :], tl.dot(a, b).to(tl.bfloat16))
    tl.store(out_ptr + 4 * N * N + i[:, None] * N + j[None, :], tl.where(a > b, a, b))
    tl.store(out_ptr + 5 * N * N + i[:, None] * N + j[None, :], (a.to(tl.float32) * 3.0).to(tl.bfloat16))
    tl.store(out_ptr + 6 * N * N + i[:, None] * N + j[None, :], tl.cumsum(a, axis=1))
    tl.store(out_ptr + 7 * N * N + i, tl.sum(a, axis=1))
    tl.store(out_ptr + 7 * N * N + N + i, tl.max(a, axis=1))


@triton.jit
def loop(out_ptr, T: tl.constexpr):
    acc = tl.zeros([1], dtype=tl.int64)
    for t in range(T):
        acc += t.to(tl.int64)
    tl.store(out_ptr + tl.arange(0, 1), acc)


take = tl.gather  # a builtin bound under the module's own name, as fla binds `gather`


@triton.jit
def gathered(x_ptr, out_ptr, N: tl.constexpr):
    i = tl.arange(0, N)
    tl.store(out_ptr + i, take(tl.load(x_ptr + i), N - 1 - i, axis=0))


@triton.jit
def atomic(x_ptr, v_ptr):
    i = tl.arange(0, 4)
    tl.atomic_add(x_ptr + i, tl.load(v_ptr + i))


def run():
    torch.manual_seed(0)
    N = 16
    a = (torch.randn(N, N) * 2).bfloat16()
    b = torch.randn(N, N).bfloat16()
    out = torch.zeros(8, N, N, dtype=torch.bfloat16)
    ops[(1,)](a, b, out, N)
    red = torch.zeros(N, N, dtype=torch.bfloat16)
    red[0], red[1] = a.float().sum(1).bfloat16(), a.max(1).values
    want = [a + b, a * b, a - b, (a.float() @ b.float()).bfloat16(), torch.where(a > b, a, b),
            (a.float() * 3).bfloat16(), a.float().cumsum(1).bfloat16(), red]
    names = ["add", "mul", "sub", "dot", "where_gt", "cast", "cumsum", "sum_max"]
    rel = {}
    for i, (n, w) in enumerate(zip(names, want)):
        r = float((out[i].float() - w.float()).abs().max() / w.float().abs().max())
        rel[n] = None if r != r else r  # NaN (JSON has none): as null
    try:
        o = torch.empty(1, dtype=torch.int64)
        loop[(1,)](o, 5)
        ok = int(o.item()) == 10
    except Exception as e:  # noqa: BLE001 — the interpreter's error is the measurement
        ok = f"{type(e).__name__}: {e}"
    try:
        x, g = torch.arange(8, dtype=torch.float32), torch.zeros(8)
        gathered[(1,)](x, g, 8)
        gather = bool(torch.equal(g, x.flip(0)))
    except Exception as e:  # noqa: BLE001
        gather = f"{type(e).__name__}: {e}"
    try:
        atomic[(1,)](torch.zeros(4, dtype=torch.bfloat16), torch.ones(4, dtype=torch.bfloat16))
        refused = None
    except Exception as e:  # noqa: BLE001
        refused = str(e)
    return {"rel": rel, "loop": ok, "gather": gather, "atomic_refused": refused}


before = run()
from nlc_torch import triton_cpu  # noqa: E402

assert triton_cpu.install()
after = run()
print(json.dumps({"before": before, "after": after}))
