"""What fla's kernels refuse or lack, as the docs state it (docs/spec/py-backend.md#forward-only,
#fla, #fla-new-rules): fla's chunked DeltaNet refuses f32 inputs; fla's recurrent Gated DeltaNet,
Comba, DPLR and chunked IPLR raise NotImplementedError from their backward; fla's recurrent KDA
returns tensors outside autograd.

What this script does, with torch and fla only (no nl-conformance code): calls each with small
inputs (B = 1, T = 4, H = 1, K = V = 4), and prints what happens: the exception's type and first
line, or whether the output has a grad_fn.

Run: /path/to/venv/bin/python repros/fla/refusals.py   (CPU: Triton's interpreter is switched on
when torch sees no GPU). Exit 0 when every statement shows, 1 when not.
"""
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
if os.environ.get("TRITON_INTERPRET") == "1":  # the interpreter cannot benchmark: each autotuned kernel at its first configuration
    from triton.runtime.autotuner import Autotuner
    _prune = Autotuner.prune_configs
    Autotuner.prune_configs = lambda self, kwargs: _prune(self, kwargs)[:1]

from fla.ops.comba import fused_recurrent_comba  # noqa: E402
from fla.ops.delta_rule import chunk_delta_rule  # noqa: E402
from fla.ops.gated_delta_rule import fused_recurrent_gated_delta_rule  # noqa: E402
from fla.ops.generalized_delta_rule import chunk_iplr_delta_rule, fused_recurrent_dplr_delta_rule  # noqa: E402
from fla.ops.kda import fused_recurrent_kda  # noqa: E402

DEV = "cuda" if torch.cuda.is_available() else "cpu"
B, T, H, K = 1, 4, 1, 4


def t(*s, dtype=torch.float32, scale=1.0):
    return (torch.randn(*s, generator=GEN) * scale).to(DEV, dtype).requires_grad_(True)


GEN = torch.Generator().manual_seed(0)


def attempt(what, fn, backward=True):
    try:
        out = fn()
        o = out[0] if isinstance(out, tuple) else out
        if not backward:
            return "ok"
        if o.grad_fn is None:
            return "no grad_fn (outside autograd)"
        o.sum().backward()
        return "backward ran"
    except Exception as e:  # noqa: BLE001  (the finding is the exception)
        return f"{type(e).__name__}: {str(e).strip().splitlines()[0][:120]}"


def main():
    q, k, v = t(B, T, H, K), t(B, T, H, K), t(B, T, H, K)
    kn = torch.nn.functional.normalize(k.detach(), dim=-1).requires_grad_(True)
    beta = torch.rand(B, T, H, generator=GEN).to(DEV).requires_grad_(True)
    g = (-torch.rand(B, T, H, generator=GEN)).to(DEV).requires_grad_(True)
    gk = (-torch.rand(B, T, H, K, generator=GEN)).to(DEV).requires_grad_(True)
    a = (-0.5 * torch.nn.functional.normalize(torch.randn(B, T, H, K, generator=GEN), dim=-1)).to(DEV).requires_grad_(True)
    b = torch.nn.functional.normalize(torch.randn(B, T, H, K, generator=GEN), dim=-1).to(DEV).requires_grad_(True)
    p = torch.nn.functional.normalize(torch.randn(B, T, H, K, generator=GEN), dim=-1).to(DEV).requires_grad_(True)
    results = {
        "chunk_delta_rule, f32 inputs": (attempt("", lambda: chunk_delta_rule(q, kn, v, beta), backward=False), "float32"),
        "fused_recurrent_gated_delta_rule backward": (attempt("", lambda: fused_recurrent_gated_delta_rule(q, kn, v, g, beta)), "NotImplementedError"),
        "fused_recurrent_comba backward": (attempt("", lambda: fused_recurrent_comba(q, kn, v, p, g, beta)), "NotImplementedError"),
        "fused_recurrent_dplr_delta_rule backward": (attempt("", lambda: fused_recurrent_dplr_delta_rule(q, kn, v, a, b, gk)), "NotImplementedError"),
        "chunk_iplr_delta_rule backward": (attempt("", lambda: chunk_iplr_delta_rule(q, kn, v, a, b)), "NotImplementedError"),
        "fused_recurrent_kda": (attempt("", lambda: fused_recurrent_kda(q, kn, v, gk, beta)), "no grad_fn"),
    }
    shown = True
    for name, (got, want) in results.items():
        ok = want in got
        shown &= ok
        print(f"  {name}: {got}{'' if ok else f'   (expected: {want})'}")
    print(("SHOWN" if shown else "NOT SHOWN") + ": chunk_delta_rule refuses f32; the recurrent Gated DeltaNet, Comba, DPLR "
          "and the chunked IPLR have no backward; the recurrent KDA's output is outside autograd")
    return 0 if shown else 1


if __name__ == "__main__":
    raise SystemExit(main())
