"""Comba and DPLR as per-token PyTorch kernels (the recurrences of python/nlc_torch/rules.py, one
(b, h) sequence at a time, in f32, backward by autograd), clean and with a bug planted that shows only
after many tokens: the state scaled by 1 + 1/64 once, at token 512 (a drift in a long sequence's path,
such as a counter that wraps). The default profile's sequences (T <= 20) and the regime profile's
boundary, wide and heads batches (T <= 129) never reach it; the long batch (T = 1000-1040) does, and
Comba and DPLR are judged there since they draw contractive inputs in it (RuleDecl.longInputs,
docs/spec/conformance.md#long-inputs). tests/regime-long-planted.test.ts runs them.
"""
import torch

DRIFT_AT = 512


def _seq(rule, k, v, q, p, a, b, alpha, theta, M, drift):
    S = M.t()  # key-major S = M^T [d_k, d_v]
    ys = []
    for t in range(k.shape[0]):
        if rule == "comba":
            u = theta[t] * (v[t] - S.t() @ p[t])
            S = (1 - alpha[t]) * S + torch.outer(k[t], u)
        else:
            S = (1 - alpha[t]).unsqueeze(1) * S + torch.outer(b[t], a[t] @ S) + torch.outer(k[t], v[t])
        if drift and t == DRIFT_AT:
            S = S * (1 + 1 / 64)
        ys.append(S.t() @ q[t])
    return torch.stack(ys), S.t()


def _kernel(drift):
    def run(q, k=None, v=None, p=None, a=None, b=None, alpha=None, theta=None, initial_state=None, rule=None):
        B, T, H, _ = q.shape
        ys, finals = [], []
        for bi in range(B):
            for h in range(H):
                tok = lambda x: None if x is None else x[bi, :, h]  # noqa: E731
                y, M = _seq(rule, tok(k), tok(v), tok(q), tok(p), tok(a), tok(b), tok(alpha), tok(theta), initial_state["M"][bi, h], drift)
                ys.append(y)
                finals.append(M)
        y = torch.stack(ys).reshape(B, H, T, -1).transpose(1, 2)
        return y, {"M": torch.stack(finals).reshape(B, H, *initial_state["M"].shape[2:])}

    run.nlc = {"rules": ["comba", "dplr"], "dtype": "f32", "layout": "BTHD", "state_layout": "ours", "state_dict": True}
    return run


clean = _kernel(False)
drift = _kernel(True)
