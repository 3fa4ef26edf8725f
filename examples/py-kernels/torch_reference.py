"""Every rule's inner recurrence and frozen read from the independent PyTorch reference (python/nlc_torch/rules.py)
served as a `py:` kernel, one (b, h) sequence at a time, in f32. It exercises the `py:` backend on
every rule's inputs and states (omega, x, several state tensors, hyperparameters through
`config`), and is what a kernel author can diff their own kernel against.

Run:  node_modules/.bin/bun run conformance/cli.ts --backend py:examples/py-kernels/torch_reference.py:torch_reference --filter C5/py-
"""
import torch

from nlc_torch.rules import GATES, INNER, _frozen_read, resolve_config


def torch_reference(q, k=None, v=None, x=None, alpha=None, theta=None, eta=None, omega=None, initial_state=None, rule=None, config=None):
    frozen = rule.endswith(".frozen")
    rule = rule[: -len(".frozen")] if frozen else rule
    cfg = resolve_config(rule, config)
    gates_all = {"alpha": alpha, "theta": theta, "eta": eta}
    B, T, H, _ = q.shape
    ys, finals = [], []
    for b in range(B):
        for h in range(H):
            tok = lambda t: None if t is None else t[b, :, h]  # noqa: E731
            st = {n: s[b, h] for n, s in initial_state.items()}
            if frozen:
                ys.append(_frozen_read(rule, tok(q), st, cfg))
                continue
            g = {n: gates_all[n][b, :, h] for n in GATES[rule]}
            y, fin = INNER[rule](tok(k), tok(v), tok(q), tok(x), g, tok(omega), st, cfg)
            ys.append(y)
            finals.append({n: fin[n] for n in initial_state})
    y = torch.stack(ys).reshape(B, H, T, -1).transpose(1, 2)
    if frozen:
        return y
    final = {n: torch.stack([f[n] for f in finals]).reshape(B, H, *initial_state[n].shape[2:]) for n in initial_state}
    return y, final


torch_reference.nlc = {
    "rules": list(INNER) + [f"{r}.frozen" for r in INNER],
    "dtype": "f32",
    "layout": "BTHD",
    "state_layout": "ours",
    "state_dict": True,
}
