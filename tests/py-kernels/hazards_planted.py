"""Planted kernels for the hazard probes (docs/spec/hazards.md, tests/hazards-py-planted.test.ts):
each is the naive delta kernel of examples/py-kernels with one hazard that the reference
comparison alone does not see. Every one computes the right y, final state and gradients.

* `reads_past_gate`: for a key size that is not a power of two, the last (token, head)'s gate is
  loaded as a block of two lanes with the second lane unmasked, and the unused lane's value is
  multiplied by the zero-padded key (0 · g): one element read past the end of `forget`, as
  flash-linear-attention's fused_recurrent_kda did. It reads the raw memory after the tensor (as
  a Triton load would): whatever the allocator left there, so it passes whenever that is finite.
* `writes_input`: uses its `beta` input as scratch after reading it (outside autograd's view).
* `scratch_input`: the same, storing a constant (0.5) there: its second write of an input is bitwise
  the first, so a call on an input it already wrote changes nothing the guards see; before the
  request's probes worked on copies, the ignored-input probe's call wrote the judged request's own
  beta, and the forward check named the kernel "not deterministic" instead.
* `writes_past_end`: writes one element after the end of its input `v` where the tensor's
  storage has room for it (a Triton store with an off-by-one mask; without room it writes nothing).
* `nondeterministic`: sums each output over the key in a random order (as atomics do): its two
  runs of a case differ in the last bits of y.
* `nondeterministic_declared`: the same, declaring it with a tolerance: passes, the tolerance reported.
* `nondeterministic_dbeta`: a deterministic forward whose gradient of beta moves in its last bits
  from run to run (as an atomic accumulation does): its backward's two runs differ in dbeta.
"""
import ctypes
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "py-kernels"))
from naive_delta import naive_delta  # noqa: E402

DECL = naive_delta.nlc
_CTYPE = {torch.float32: ctypes.c_float, torch.float64: ctypes.c_double}


def _sig(fn):
    def kernel(q, k, v, forget, beta, scale=None, initial_state=None, output_final_state=False):
        return fn(q=q, k=k, v=v, forget=forget, beta=beta, scale=scale, initial_state=initial_state,
                  output_final_state=output_final_state)
    kernel.nlc = dict(DECL)
    return kernel


def _element_after(t: torch.Tensor) -> torch.Tensor:
    """The element right after a contiguous tensor's last one, read from raw memory (an unmasked load)."""
    n = t.numel()
    if t.device.type == "cpu" and t.dtype in _CTYPE:
        value = _CTYPE[t.dtype].from_address(t.data_ptr() + n * t.element_size()).value
        return torch.tensor(value, dtype=t.dtype)
    return t.as_strided((n + 1,), (1,), t.storage_offset())[n]  # a device tensor: within its storage only


def _reads_past_gate(q, k, v, forget, beta, **kw):
    dk = k.shape[-1]
    if dk & (dk - 1):  # not a power of two: the padded lane's gate is loaded unmasked
        extra = _element_after(forget.contiguous())
        flat = forget.reshape(-1).clone()
        flat[-1] = flat[-1] + 0.0 * extra  # the padded lane: key 0 times its gate
        forget = flat.view(forget.shape)
    return naive_delta(q=q, k=k, v=v, forget=forget, beta=beta, **kw)


def _writes_input(q, k, v, forget, beta, **kw):
    out = naive_delta(q=q, k=k, v=v, forget=forget, beta=beta, **kw)
    beta.data.mul_(0.5)  # scratch space, after the last read
    return out


def _scratch_input(q, k, v, forget, beta, **kw):
    out = naive_delta(q=q, k=k, v=v, forget=forget, beta=beta, **kw)
    beta.data.fill_(0.5)  # scratch space, after the last read
    return out


def _writes_past_end(q, k, v, forget, beta, **kw):
    out = naive_delta(q=q, k=k, v=v, forget=forget, beta=beta, **kw)
    n = v.numel()
    if v.is_contiguous() and v.storage_offset() + n < v.storage().size():
        with torch.no_grad():
            v.as_strided((n + 1,), (1,), v.storage_offset())[n] = 0.0  # one past the end
    return out


def _shuffled_sums(q, k, v, forget, beta, scale=None, initial_state=None, output_final_state=False):
    """naive_delta with every read o_t = S_t^T q_t summed over the key in a random order."""
    B, T, H, dk = k.shape
    scale = dk ** -0.5 if scale is None else scale
    S = initial_state if initial_state is not None else q.new_zeros(B, H, dk, v.shape[-1])
    outs = []
    for t in range(T):
        kt, vt, qt = k[:, t], v[:, t], q[:, t] * scale
        a, b = forget[:, t, :, None, None], beta[:, t, :, None, None]
        err = torch.einsum("bhk,bhkv->bhv", kt, S) - vt
        S = (1 - a) * S - b * torch.einsum("bhk,bhv->bhkv", kt, err)
        terms = qt[..., :, None] * S  # [B, H, dk, dv]
        perm = torch.randperm(dk).tolist()
        o = terms[:, :, perm[0]]
        for i in perm[1:]:
            o = o + terms[:, :, i]
        outs.append(o)
    return torch.stack(outs, dim=1), (S if output_final_state else None)


class _JitterGrad(torch.autograd.Function):
    """The identity, whose backward scales the gradient by 1 + u·2^-20 with u uniform in [0, 1) on each call."""

    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return g * (1 + float(torch.rand(())) * 2.0 ** -20)


def _nondeterministic_dbeta(q, k, v, forget, beta, **kw):
    return naive_delta(q=q, k=k, v=v, forget=forget, beta=_JitterGrad.apply(beta), **kw)


reads_past_gate = _sig(_reads_past_gate)
writes_input = _sig(_writes_input)
scratch_input = _sig(_scratch_input)
writes_past_end = _sig(_writes_past_end)
nondeterministic = _sig(_shuffled_sums)
nondeterministic_declared = _sig(_shuffled_sums)
nondeterministic_dbeta = _sig(_nondeterministic_dbeta)
nondeterministic_declared.nlc = {**DECL, "nondeterministic": {"tolerance": 1e-5}}
