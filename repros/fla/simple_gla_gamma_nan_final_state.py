"""fla's chunk_simple_gla with a decay per head (`g_gamma`) returns a NaN final state when the last
chunk is partial and the decay is strong, and so does chunk_lightning_attn, which calls it
(docs/spec/py-backend.md#fla-linear-attention).

The op's own stated update (simple GLA with g_gamma [H], "head-wise data-independent decay"):
S_t = exp(g_gamma[h]) S_{t-1} + k_t v_t^T, o_t = S_t^T (scale q_t); the final state is S_T.

What this script does, with torch and fla only (no nl-conformance code): B = 1, H = 2, K = V = 4, f32,
random q, k, v and initial state, g_gamma = log(1 - alpha) for head 0 and log(0.95) for head 1, fla's
chunks of 64 tokens. It runs chunk_simple_gla at T = 64 and T = 65 for alpha = 0.75 and 0.76 and
compares o and the final state with that update written as a plain f64 loop; then
chunk_lightning_attn (layer_idx = 0, num_layers = 2: decays exp(-4 h) per head h) at T = 64 and 65.
Shown when the final state has NaN at T = 65 with alpha = 0.76 and none at 0.75, none at T = 64, o
agrees with the loop within 1e-4 throughout, and lightning's final state has NaN at T = 65 and none
at T = 64. 1 - 2^(-128/63) = 0.7555 is the alpha at which 2^(-log2(1 - alpha) * 63) (a decay
ratio across the 63 padded positions of a one-token last chunk) passes the largest f32.

Run: /path/to/venv/bin/python repros/fla/simple_gla_gamma_nan_final_state.py   (CPU: Triton's
interpreter is switched on when torch sees no GPU). Exit 0 when shown, 1 when not.
"""
import os

import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
if os.environ.get("TRITON_INTERPRET") == "1":  # the interpreter cannot benchmark: each autotuned kernel at its first configuration
    from triton.runtime.autotuner import Autotuner
    _prune = Autotuner.prune_configs
    Autotuner.prune_configs = lambda self, kwargs: _prune(self, kwargs)[:1]

from fla.ops.lightning_attn import chunk_lightning_attn  # noqa: E402
from fla.ops.simple_gla import chunk_simple_gla  # noqa: E402

DEV = "cuda" if torch.cuda.is_available() else "cpu"
H, K = 2, 4


def inputs(T):
    gen = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, T, H, K, generator=gen) for _ in range(3))
    return q, k, v, torch.randn(1, H, K, K, generator=gen)


def loop(q, k, v, h0, gamma):
    """The stated update in f64: o [T, H, V] and the final state [H, K, V]."""
    S, outs = h0[0].double(), []
    for t in range(q.shape[1]):
        S = gamma.double().exp()[:, None, None] * S + k[0, t].double()[:, :, None] * v[0, t].double()[:, None, :]
        outs.append(torch.einsum("hkv,hk->hv", S, q[0, t].double()))
    return torch.stack(outs), S


def run(T, gamma):
    q, k, v, h0 = inputs(T)
    o, ht = chunk_simple_gla(*(x.to(DEV) for x in (q, k, v)), g_gamma=gamma.to(DEV), scale=1.0, initial_state=h0.to(DEV),
                             output_final_state=True)
    o_ref, _ = loop(q, k, v, h0, gamma)
    return torch.isnan(ht).sum().item(), (o[0].double().cpu() - o_ref).abs().max().item()


def main():
    shown = True
    for alpha, T, want_nan in ((0.75, 65, False), (0.76, 65, True), (0.76, 64, False)):
        nans, o_err = run(T, torch.log(1 - torch.tensor([alpha, 0.05])))
        ok = (nans > 0) == want_nan and o_err < 1e-4
        shown &= ok
        print(f"  chunk_simple_gla, alpha = {alpha}, T = {T}: {nans} NaN of {H * K * K} in the final state; "
              f"o vs the f64 loop {o_err:.2e}" + ("" if ok else "   (not as stated)"))
    for T, want_nan in ((64, False), (65, True)):
        q, k, v, h0 = inputs(T)
        _, ht = chunk_lightning_attn(*(x.to(DEV) for x in (q, k, v)), layer_idx=0, num_layers=2, scale=1.0,
                                     initial_state=h0.to(DEV), output_final_state=True)
        nans = torch.isnan(ht).sum().item()
        ok = (nans > 0) == want_nan
        shown &= ok
        print(f"  chunk_lightning_attn, layer 0 of 2, T = {T}: {nans} NaN of {H * K * K} in the final state"
              + ("" if ok else "   (not as stated)"))
    print(("SHOWN" if shown else "NOT SHOWN") + ": chunk_simple_gla with g_gamma (and chunk_lightning_attn) returns a NaN final "
          "state when the last chunk is partial and the decay is below 2^(-128/63) per token; o is not affected")
    return 0 if shown else 1


if __name__ == "__main__":
    raise SystemExit(main())
