"""A naive PyTorch Titans kernel exercising the other adapters of the `py:` backend
(docs/spec/py-backend.md#contract): inputs laid out [B, H, T, d] (gates [B, H, T]), two state
tensors passed and returned as a dict {"M", "S"} in the reference's own layout, and a fixed query
scale of 0.5 that the kernel always applies (declared as a number: the harness divides it out).

    S_t = eta_t S_{t-1} - theta_t (M_{t-1} k_t - v_t) k_t^T,   M_t = (1 - alpha_t) M_{t-1} + S_t,   y_t = M_t (0.5 q_t)

Run:  node_modules/.bin/bun run conformance/cli.ts --backend py:examples/py-kernels/naive_titans.py:naive_titans --filter C5/py-
"""
import torch


def naive_titans(q, k, v, alpha, theta, eta, state):
    M, S = state["M"], state["S"]                                   # [B, H, d_v, d_k]
    ys = []
    for t in range(k.shape[2]):
        kt, vt, qt = k[:, :, t], v[:, :, t], 0.5 * q[:, :, t]        # [B, H, d]
        a, th, et = alpha[:, :, t, None, None], theta[:, :, t, None, None], eta[:, :, t, None, None]
        e = torch.einsum("bhvk,bhk->bhv", M, kt) - vt
        S = et * S - th * torch.einsum("bhv,bhk->bhvk", e, kt)
        M = (1 - a) * M + S
        ys.append(torch.einsum("bhvk,bhk->bhv", M, qt))
    return torch.stack(ys, dim=2), {"M": M, "S": S}


naive_titans.nlc = {
    "rules": ["titans"],
    "dtype": "f32",
    "layout": "BHTD",
    "state_layout": "ours",
    "initial_state": "state",
    "scale": 0.5,
}
