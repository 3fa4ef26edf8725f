"""Intermediates held in a storage dtype (docs/spec/precision.md#intermediates): the emulation the
plain reference runs with for a kernel that declares `intermediates: "storage"`.

A rule's forward marks the values a kernel stores between its products with `rules.store(x)`:
identity (the very same tensor) unless `storing(...)` is active, so the reference is unchanged,
bit for bit, outside it. Inside it, each marked value is rounded to the storage dtype in the
forward and its gradient is rounded to the same dtype in the backward (a kernel that stores a
tensor in bf16 stores its gradient in bf16 too); every product and sum between the marks stays f32,
as a tensor-core matmul accumulates.

Rounding is to nearest even, or (`rounding` = a seed) random: a value between two neighbours in
the dtype goes to either with probability 1/2, from a generator seeded by `rounding` (the same runs
every time) — as `round32` (src/precision.ts) does for f32 sums.
"""
from __future__ import annotations

import contextlib
from typing import Optional, Union

import torch

try:
    import numpy as np
    torch.from_numpy(np.zeros(1))
except Exception:  # a torch without numpy: the torch ops below
    np = None

from . import rules

LOW = {"bf16": torch.bfloat16, "f16": torch.float16}
# significand bits (with the implicit one) and smallest normal exponent, as in src/precision.ts
FORMATS = {"bf16": (8, -126), "f16": (11, -14)}
# the largest finite value of each: below it, rounding never leaves the finite range
LARGEST = {"bf16": float(torch.finfo(torch.bfloat16).max), "f16": float(torch.finfo(torch.float16).max)}


class Draws:
    """The uniform numbers of one stochastic-rounding run, drawn from `gen` a block at a time: torch's
    CPU generator fills a tensor element by element, in order, so the numbers taken from a block are
    those separate draws of the same sizes would give, in turn (tests/storage-rounding.test.ts)."""

    BLOCK = 4096

    def __init__(self, gen: torch.Generator):
        self.gen = gen
        self.buf = np.empty(0)
        self.pos = 0

    def take(self, n: int):
        if self.pos + n > self.buf.size:
            more = torch.rand(max(self.BLOCK, n), generator=self.gen, dtype=torch.float64).numpy()
            self.buf = np.concatenate([self.buf[self.pos:], more])
            self.pos = 0
        out = self.buf[self.pos:self.pos + n]
        self.pos += n
        return out


def round_to(x: torch.Tensor, dtype: str, gen: Union[None, torch.Generator, Draws]) -> torch.Tensor:
    """x rounded to `dtype` (values kept in x's dtype): to nearest even, or stochastically from `gen`.

    With `gen` a Draws, the stochastic rounding runs on the tensor's numpy view (a store is a handful
    of elements, where a torch call's overhead is most of the cost); `round_to_torch` is the same in
    torch ops, kept as its oracle. Every step is exact — frexp, a power-of-two ulp and floor in f64,
    or, from f32 to bf16, the 16 low bits cut — so the two agree bit for bit and use the same numbers
    (tests/storage-rounding.test.ts).
    """
    if gen is None:
        return x.to(LOW[dtype]).to(x.dtype)
    if not isinstance(gen, Draws):
        return round_to_torch(x, dtype, gen)
    a = x.detach().numpy()
    if a.size == 0:
        return x.detach().clone()
    up = gen.take(a.size).reshape(a.shape) < 0.5
    if a.dtype == np.float32 and dtype == "bf16":
        # toward zero: the low 16 bits cut; away: one bf16 ulp more in magnitude. Rounding up is away
        # for a > 0 and toward zero for a < 0; a zero reached from below is +0, as lo + ulp is.
        bits = a.view(np.int32)
        cut = bits & np.int32(-65536)
        chosen = np.where(up != (bits < 0), cut + np.int32(65536), cut)
        chosen = np.where(chosen == np.int32(-2 ** 31), np.int32(0), chosen)
        out = torch.from_numpy(np.where(cut == bits, bits, chosen).view(np.float32))
    else:
        nbits, emin = FORMATS[dtype]
        a64 = a.astype(np.float64)
        _, e = np.frexp(a64)                                # |a| in [2^(e-1), 2^e)
        ulp = np.ldexp(1.0, np.maximum(e - 1, emin) - (nbits - 1))
        lo = np.floor(a64 / ulp) * ulp
        out = torch.from_numpy(np.where(lo == a64, a64, np.where(up, lo + ulp, lo))).to(x.dtype)
    if np.abs(a).max() < LARGEST[dtype]:                   # finite, and below the largest finite value: as below
        return out
    # past the largest finite value (or not finite): as rounding to nearest gives it
    nearest = x.to(LOW[dtype]).to(x.dtype)
    return torch.where(torch.isfinite(nearest), out, nearest)


def round_to_torch(x: torch.Tensor, dtype: str, gen: Optional[torch.Generator]) -> torch.Tensor:
    """round_to in torch ops only: the definition the numpy path is tested against."""
    if gen is None:
        return x.to(LOW[dtype]).to(x.dtype)
    bits, emin = FORMATS[dtype]
    a = x.detach().double()
    _, e = torch.frexp(a)                                   # |a| in [2^(e-1), 2^e)
    ulp = torch.ldexp(torch.ones_like(a), torch.clamp(e - 1, min=emin) - (bits - 1))
    lo = torch.floor(a / ulp) * ulp
    up = torch.rand(a.shape, generator=gen, dtype=torch.float64) < 0.5
    nearest = x.to(LOW[dtype]).to(x.dtype)
    # past the largest finite value (or not finite): as rounding to nearest gives it
    return torch.where(torch.isfinite(nearest), torch.where(lo == a, a, torch.where(up, lo + ulp, lo)).to(x.dtype), nearest)


class _Store(torch.autograd.Function):
    """A value stored in the low dtype: rounded forward, its gradient rounded backward."""

    @staticmethod
    def forward(ctx, x, dtype, gen):
        ctx.dtype, ctx.gen = dtype, gen
        return round_to(x, dtype, gen)

    @staticmethod
    def backward(ctx, g):
        return round_to(g, ctx.dtype, ctx.gen), None, None


# rules whose forward marks its stored values (rules.marks_stored; others cannot be emulated: an error names them)
STORING_RULES = tuple(k for k, f in rules.INNER.items() if getattr(f, "marks_stored", False))


@contextlib.contextmanager
def storing(dtype: str, rounding: Union[str, int]):
    """Within: rules.store rounds to `dtype` (`rounding`: "nearest" or a seed for stochastic rounding)."""
    if dtype not in LOW:
        raise rules.InputError(f"intermediates.dtype: expected bf16 or f16, got {dtype!r}")
    if rounding != "nearest" and (isinstance(rounding, bool) or not isinstance(rounding, int)):
        raise rules.InputError(f"intermediates.rounding: expected 'nearest' or an integer seed, got {rounding!r}")
    gen: Union[None, torch.Generator, Draws] = None
    if rounding != "nearest":
        gen = torch.Generator()
        gen.manual_seed(int(rounding))
        if np is not None:
            gen = Draws(gen)
    before = rules.store
    rules.store = lambda x: _Store.apply(x, dtype, gen)
    try:
        yield
    finally:
        rules.store = before
