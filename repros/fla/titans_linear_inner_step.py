"""fla-core 0.5.2, fla/ops/titans/naive.py: the inner step of `titans_linear` and
`chunk_titans_linear` is not the gradient of the loss their docstring and layer state.

The stated inner loss is l(M) = ||w * LN(k M) + b - (v - k)||^2 (the step applies 2 * theta * k^T v_new,
v_new meant as d l / d (k M) / 2). One token, alpha = eta = 0, theta = 1, from a random M_0:
M_1 - M_0 must equal -grad_M l(M_0). Run: python repros/fla/titans_linear_inner_step.py (needs fla-core, torch).
Prints the step fla takes, the autograd gradient, and their largest difference.
"""
import torch
import torch.nn.functional as F
from fla.ops.titans.naive import chunk_titans_linear, titans_linear

torch.manual_seed(0)
B, H, T, D, eps = 1, 1, 1, 4, 1e-6
dt = torch.float64
q, k, v = (torch.randn(B, H, T, D, dtype=dt) for _ in range(3))
w, b = torch.rand(H, D, dtype=dt) + 0.5, torch.randn(H, D, dtype=dt) * 0.5
theta = torch.ones(B, H, T, 1, dtype=dt)
alpha = torch.zeros(B, H, T, 1, dtype=dt)
eta = torch.zeros(B, H, T, 1, dtype=dt)
M0 = torch.randn(B, H, D, D, dtype=dt) * 0.5

# the stated loss, differentiated by autograd (LN over the value dim, learnable w, b)
M = M0.clone().requires_grad_(True)
z = k[0, 0] @ M[0, 0]                       # [1, D]: k M
loss = ((w[0] * F.layer_norm(z, (D,), eps=eps) + b[0] - (v[0, 0] - k[0, 0])) ** 2).sum()
(grad,) = torch.autograd.grad(loss, M)

worst = {}
for name, fn in (("titans_linear", titans_linear), ("chunk_titans_linear", chunk_titans_linear)):
    _, M1 = fn(q.clone(), k.clone(), v.clone(), w, b, theta, alpha, eta, eps, 1, M0.clone(), True)
    step = M1 - M0                             # = -theta * grad when the step is the gradient
    print(f"{name}: fla step\n{step[0, 0]}\n-grad l\n{-grad[0, 0]}")
    print(f"{name}: max |step + grad| = {(step + grad).abs().max().item():.3e}")
    worst[name] = (step + grad).abs().max().item()

# The step with fla's own commented-out expression, (D*g - sum g - x_hat*sum(g*x_hat)) / (rstd*D),
# in place of the one it runs, D*g - sum g / (rstd*D) - x_hat*sum(g*x_hat) / (rstd*D):
km = z.detach()
mean, var = km.mean(-1, keepdim=True), km.var(-1, unbiased=False, keepdim=True)
rstd = torch.sqrt(var + eps)
xh = (km - mean) / rstd
g = w[0] * (w[0] * xh + b[0] - (v[0, 0] - k[0, 0]))
v_new = (D * g - g.sum(-1, keepdim=True) - xh * (g * xh).sum(-1, keepdim=True)) / (rstd * D)
step = -2 * k[0, 0].transpose(-1, -2) @ v_new
print(f"parenthesised form: max |step + grad| = {(step + grad[0, 0]).abs().max().item():.3e}")
fixed = (step + grad[0, 0]).abs().max().item()
shown = min(worst.values()) > 1e-3 and fixed < 1e-9
print(("SHOWN" if shown else "NOT SHOWN") + ": fla's titans_linear and chunk_titans_linear take a step that is not"
      " -grad of their stated inner loss; the parenthesised form is")
raise SystemExit(0 if shown else 1)
