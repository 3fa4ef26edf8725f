"""fla's fused_recurrent_rwkv6 drops the final state's gradient in its backward
(docs/spec/py-backend.md#fla-linear-attention).

The op's own stated update (its docstring and forward kernel): o_t = (S_{t-1} + diag(u) k_t v_t^T)^T
(scale r_t), then S_t = diag(exp w_t) S_{t-1} + k_t v_t^T, returning o and the final state S_T.
`FusedRecurrentRWKV6Function.backward(ctx, do, dht)` receives the final state's gradient dht and
does not pass it on: `fused_recurrent_rwkv6_bwd` takes no dht.

What this script does, with torch and fla only (no nl-conformance code): B = 1, T = 4, H = 1,
K = V = 4, f32, random r, k, v, w < 0, u, h0; the loss L = sum(o * do) + sum(S_T * dht) with random
do, dht. The exact gradients come from that update written as a plain f64 loop, by autograd. fla's
gradients are compared with the exact ones (1) with dht as drawn and (2) with dht = 0, where only
the o term counts. Shown when fla's dk, dv, dw and dh0 agree with case (2) within 1e-4 and differ
from case (1) by more than 1e-2 (relative to each tensor's largest magnitude), i.e. fla returns the
gradient of sum(o * do) alone. dr (printed) and du are the same in both cases: r and u do not reach S_T.

Run: /path/to/venv/bin/python repros/fla/rwkv6_recurrent_dht_dropped.py   (CPU: Triton's interpreter
is switched on when torch sees no GPU). Exit 0 when shown, 1 when not.
"""
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
if os.environ.get("TRITON_INTERPRET") == "1":  # the interpreter cannot benchmark: each autotuned kernel at its first configuration
    from triton.runtime.autotuner import Autotuner
    _prune = Autotuner.prune_configs
    Autotuner.prune_configs = lambda self, kwargs: _prune(self, kwargs)[:1]

from fla.ops.rwkv6 import fused_recurrent_rwkv6  # noqa: E402

DEV = "cuda" if torch.cuda.is_available() else "cpu"
B, T, H, K = 1, 4, 1, 4
GEN = torch.Generator().manual_seed(0)


def rand(*s):
    return torch.randn(*s, generator=GEN, dtype=torch.float64)


def exact(r, k, v, w, u, h0, do, dht, scale):
    """The op's stated update in f64, its gradients by autograd."""
    xs = [x.clone().requires_grad_(True) for x in (r, k, v, w, h0)]
    r_, k_, v_, w_, h0_ = xs
    S, loss = h0_[0], 0.0
    for t in range(T):
        kv = k_[0, t][:, :, None] * v_[0, t][:, None, :]
        o = torch.einsum("hkv,hk->hv", S + u[:, :, None] * kv, scale * r_[0, t])
        loss = loss + (o * do[0, t]).sum()
        S = w_[0, t].exp()[:, :, None] * S + kv
    loss = loss + (S * dht[0]).sum()
    return dict(zip(("dr", "dk", "dv", "dw", "dh0"), torch.autograd.grad(loss, xs)))


def main():
    r, k, v, u = rand(B, T, H, K), rand(B, T, H, K), rand(B, T, H, K), rand(H, K)
    w = -torch.rand(B, T, H, K, generator=GEN, dtype=torch.float64)
    h0, do, dht = rand(B, H, K, K), rand(B, T, H, K), rand(B, H, K, K)
    scale = K ** -0.5
    ins = [x.to(DEV, torch.float32).requires_grad_(True) for x in (r, k, v, w, u, h0)]
    o, ht = fused_recurrent_rwkv6(*ins[:5], scale=scale, initial_state=ins[5], output_final_state=True)
    torch.autograd.backward([o, ht], [do.to(DEV, torch.float32), dht.to(DEV, torch.float32)])
    fla = {n: x.grad.double().cpu() for n, x in zip(("dr", "dk", "dv", "dw", "du", "dh0"), ins)}
    with_dht = exact(r, k, v, w, u, h0, do, dht, scale)
    without = exact(r, k, v, w, u, h0, do, torch.zeros_like(dht), scale)
    shown = True
    for n in with_dht:
        big = with_dht[n].abs().max().item()
        off_with = (fla[n] - with_dht[n]).abs().max().item() / big
        off_without = (fla[n] - without[n]).abs().max().item() / max(without[n].abs().max().item(), 1e-30)
        ok = off_without < 1e-4 and (off_with > 1e-2 or n == "dr")
        shown &= ok
        print(f"  {n}: fla vs exact with dht {off_with:.3e}, vs exact with dht = 0 {off_without:.3e} (relative to the largest)"
              + (" (r does not reach S_T)" if n == "dr" else "") + ("" if ok else "   (not as stated)"))
    print(("SHOWN" if shown else "NOT SHOWN") + ": fused_recurrent_rwkv6's backward returns the gradient of sum(o * do) alone; "
          "the final state's gradient dht is dropped")
    return 0 if shown else 1


if __name__ == "__main__":
    raise SystemExit(main())
