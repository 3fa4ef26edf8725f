"""A naive PyTorch delta-rule kernel in the conventions of popular linear-attention kernel
libraries, and its adaptor for `--backend py:` (docs/spec/py-backend.md#contract):

* inputs [B, T, H, d] (one head's key, value and query per token and head);
* gates per (token, head) [B, T, H]: `forget` (our alpha) and `beta` (our theta, the step size);
* the state stored as [B, H, d_k, d_v], i.e. transposed relative to the reference's M [d_v, d_k]
  (the output is o_t = S_t^T q_t);
* `initial_state` / `output_final_state` keywords; a `scale` keyword applied to q (default
  d_k^-1/2, as those libraries do; the adaptor declares it so the harness passes 1.0).

The update (the reference's Delta rule, docs/spec/titans-family.md, written in the transposed state):
    S_t = (1 - forget_t) S_{t-1} - beta_t k_t (k_t^T S_{t-1} - v_t^T),    o_t = S_t^T (scale q_t)

Run:  node_modules/.bin/bun run conformance/cli.ts --backend py:examples/py-kernels/naive_delta.py:naive_delta --filter py-
"""
import torch


def naive_delta(q, k, v, forget, beta, scale=None, initial_state=None, output_final_state=False):
    B, T, H, dk = k.shape
    dv = v.shape[-1]
    if scale is None:
        scale = dk ** -0.5
    S = initial_state if initial_state is not None else q.new_zeros(B, H, dk, dv)
    outs = []
    for t in range(T):
        kt, vt, qt = k[:, t], v[:, t], q[:, t] * scale            # [B, H, d]
        a, b = forget[:, t, :, None, None], beta[:, t, :, None, None]
        err = torch.einsum("bhk,bhkv->bhv", kt, S) - vt           # k^T S - v^T
        S = (1 - a) * S - b * torch.einsum("bhk,bhv->bhkv", kt, err)
        outs.append(torch.einsum("bhk,bhkv->bhv", qt, S))
    o = torch.stack(outs, dim=1) if outs else q.new_zeros(B, 0, H, dv)  # [B, T, H, d_v]; T = 0: the state unchanged
    return o, (S if output_final_state else None)


# The adaptor: what the harness needs to know to call it.
naive_delta.nlc = {
    "rules": ["delta"],
    "dtype": "f32",
    "layout": "BTHD",
    "state_layout": "transposed",
    "names": {"alpha": "forget", "theta": "beta"},
    "initial_state": "initial_state",
    "output_final_state": "output_final_state",
    "scale": "scale",
}


def naive_delta_read(q, initial_state, scale=None):
    """The frozen read of the same state (docs/spec/state-gradients.md#frozen): o_t = S^T (scale q_t)."""
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    return torch.einsum("bthk,bhkv->bthv", q * scale, initial_state)


naive_delta_read.nlc = {**naive_delta.nlc, "rules": ["delta.frozen"]}
