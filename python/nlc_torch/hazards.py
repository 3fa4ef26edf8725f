"""The guard regions of one `py:` kernel call (docs/spec/hazards.md#guards): every tensor the
kernel receives (inputs, initial state, dy and d(final state)) is a view into a larger buffer
whose slack before and after holds a guard pattern, and after the call every such buffer, slack
and data, must be bitwise what it was (a changed data element is a write into the input, a
changed guard element a write past its end).

The plan (guard bytes, the poison and finite patterns, which tensors' guards hold the poison in
this call) comes in the request header's `hazards`, and what was observed goes back in the reply
header. Which runs to make and what their results mean is decided once, for every backend kind,
by ffi/hazards.ts (the native library loader, ffi/lib-call.ts, carries out the same plan on library
memory).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Set, Tuple

import torch

# dtype -> (its name in the plan, the integer dtype of the same width its bits are viewed as)
_BITS = {
    torch.float32: ("f32", torch.int32), torch.float64: ("f64", torch.int64),
    torch.bfloat16: ("bf16", torch.int16), torch.float16: ("f16", torch.int16),
}
_WIDTH = {torch.int16: 16, torch.int32: 32, torch.int64: 64}


def _signed(bits: int, width: int) -> int:
    return bits - (1 << width) if bits >= 1 << (width - 1) else bits


def _ints(t: torch.Tensor) -> torch.Tensor:
    """A tensor's bits as integers of the same width (bitwise comparison; NaN equals the same NaN)."""
    spec = _BITS.get(t.dtype)
    t = t.detach().contiguous()
    return t if spec is None else t.view(spec[1])


def changed_elements(before: torch.Tensor, after: torch.Tensor) -> int:
    """How many elements of `after` differ bitwise from `before` (a copy handed to a kernel, and its source)."""
    return int((_ints(before) != _ints(after)).sum())


# The fill of every floating-point tensor a `py:` kernel allocates uninitialised during a call
# (docs/spec/hazards.md#unwritten): a quiet NaN with a payload of its own (not the guards' POISON,
# not a NaN arithmetic makes), so an output element still holding it is one the kernel never stored.
UNWRITTEN = {torch.float32: 0x7FD3C3C3, torch.float64: 0x7FFA3C3C3C3C3C3C, torch.bfloat16: 0x7FD3, torch.float16: 0x7E3D}
# torch's allocators whose memory is uninitialised: module functions and Tensor methods
_EMPTY_FUNCS = ("empty", "empty_like", "empty_strided")
_EMPTY_METHODS = ("new_empty", "new_empty_strided")


def _fill_unwritten(t):
    spec = _BITS.get(getattr(t, "dtype", None))
    if isinstance(t, torch.Tensor) and spec is not None and t.numel() > 0:
        itype = spec[1]
        with torch.no_grad():
            t.detach().view(itype).fill_(_signed(UNWRITTEN[t.dtype], _WIDTH[itype]))
    return t


class FillUnwritten:
    """While entered, torch.empty, empty_like, empty_strided, Tensor.new_empty and new_empty_strided
    return floating-point memory filled with UNWRITTEN (docs/spec/hazards.md#unwritten); reentrant.
    Allocations made in C++ without these (an operator's own outputs) are written by that operator."""

    _depth = 0
    _saved: Dict[Tuple[object, str], object] = {}

    def __enter__(self):
        cls = FillUnwritten
        if cls._depth == 0:
            for owner, names in ((torch, _EMPTY_FUNCS), (torch.Tensor, _EMPTY_METHODS)):
                for name in names:
                    orig = getattr(owner, name)
                    cls._saved[(owner, name)] = orig

                    def filled(*a, _orig=orig, **kw):
                        return _fill_unwritten(_orig(*a, **kw))
                    setattr(owner, name, filled)
        cls._depth += 1
        return self

    def __exit__(self, *exc):
        cls = FillUnwritten
        cls._depth -= 1
        if cls._depth == 0:
            for (owner, name), orig in cls._saved.items():
                setattr(owner, name, orig)
            cls._saved.clear()
        return False


def unwritten(t: torch.Tensor) -> torch.Tensor:
    """A boolean mask of the elements of `t` that hold UNWRITTEN (all False for a dtype without it)."""
    spec = _BITS.get(t.dtype)
    if spec is None or t.dtype not in UNWRITTEN:
        return torch.zeros(t.shape, dtype=torch.bool, device=t.device)
    return _ints(t) == _signed(UNWRITTEN[t.dtype], _WIDTH[spec[1]])


class Plan:
    """The request header's `hazards` (ffi/hazards.ts GuardRequest); absent: no guards."""

    def __init__(self, h: Optional[dict]):
        h = h or {}
        self.guard_bytes = int(h.get("guard_bytes", 0))
        self.poison: Dict[str, int] = dict(h.get("poison", {}))
        self.finite: Dict[str, int] = dict(h.get("finite", {}))
        # None: every guard holds the poison; else the tensors whose guards do (the rest: the finite pattern)
        p = h.get("poisoned")
        self.poisoned: Optional[Set[str]] = None if p is None else set(p)


class Guards:
    """The guarded tensors of one call."""

    def __init__(self, plan: Plan):
        self.plan = plan
        self.poisoned = plan.poisoned
        self.records: List[Tuple[str, torch.Tensor, torch.Tensor, int, int]] = []
        self.keywords: Dict[str, str] = {}

    @property
    def labels(self) -> List[str]:
        return [r[0] for r in self.records]

    def wrap(self, label: str, t):
        """`t` copied into the middle of a guarded buffer (inside the autograd graph when t needs a gradient)."""
        spec = _BITS.get(getattr(t, "dtype", None))
        if not isinstance(t, torch.Tensor) or spec is None or self.plan.guard_bytes <= 0 or spec[0] not in self.plan.poison:
            return t
        name, itype = spec
        G, n = self.plan.guard_bytes // t.element_size(), t.numel()
        buf = torch.empty(n + 2 * G, dtype=t.dtype, device=t.device)
        pattern = self.plan.poison if self.poisoned is None or label in self.poisoned else self.plan.finite
        buf.view(itype).fill_(_signed(int(pattern[name]), _WIDTH[itype]))
        view = buf[G:G + n]
        if t.requires_grad and torch.is_grad_enabled():
            view.copy_(t.reshape(-1))
        else:
            with torch.no_grad():
                view.copy_(t.reshape(-1))
        self.records.append((label, buf, _ints(buf).clone(), G, n))
        return view.view(t.shape)

    def wrap_all(self, kw: Dict[str, object], labels: Dict[str, str]) -> None:
        """Guards every tensor in `kw` named in `labels` (keyword -> our name); a dict of states entry by entry."""
        for key, label in labels.items():
            v = kw.get(key)
            if isinstance(v, dict):
                kw[key] = {n: self.wrap(f"{label}.{n}", t) for n, t in v.items()}
                self.keywords.update({f"{label}.{n}": f"{key}.{n}" for n in v})
            elif v is not None:
                kw[key] = self.wrap(label, v)
                self.keywords[label] = key

    def check(self) -> List[dict]:
        """Writes the call made into its inputs or their guards."""
        out: List[dict] = []
        for label, buf, before, G, n in self.records:
            now = _ints(buf)
            if torch.equal(now, before):
                continue
            diff = now != before
            inside = int(diff[G:G + n].sum())
            kw = self.keywords.get(label, label)
            if inside:
                out.append({"kind": "wrote-input", "tensor": label, "keyword": kw, "elements": inside, "of": n})
            after, ahead = int(diff[G + n:].sum()), int(diff[:G].sum())
            if after or ahead:
                out.append({"kind": "write-past-end", "tensor": label, "keyword": kw, "after": after, "before": ahead})
        return out
