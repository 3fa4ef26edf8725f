"""Our canonical tensors <-> a declared kernel's (docs/spec/py-backend.md#contract): the token
layout (`layout`), the state layout (`state_layout`), a rule's several rows per token
(`token_rows`, docs/spec/py-backend.md#token-rows), and the check of each tensor the kernel returns.
Every move is differentiable, so the autograd graph runs through it and a gradient comes back in
our layout without a hand-written inverse.
"""
from __future__ import annotations

from typing import List, Optional

import torch

from .kernel_declaration import Kernel, KernelError
from .rules import TOKEN_ROWS


def row_count(rule: str, name: str, cfg: dict) -> Optional[int]:
    """How many rows per token our input `name` has under `rule`; None where the rule does not list it in its token rows."""
    tr = TOKEN_ROWS.get(rule.split(".")[0])
    if tr is None or name not in tr["inputs"]:
        return None
    n = cfg.get(tr["hyper"])
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise KernelError(f"config.{tr['hyper']}: {rule} has {tr['hyper']} rows per token of {name}; expected a positive int, got {n!r}")
    return n


def to_kernel_rows(k: Kernel, t: torch.Tensor, n: Optional[int], gate: bool) -> torch.Tensor:
    """Our [B, T, H, n*d] (a row gate [B, T, H, n]) -> the kernel's rows; differentiable. n None: not a row input."""
    if k.token_rows is None or k.token_rows["layout"] == "width" or n is None:
        return t
    B, T, H = t.shape[:3]
    if gate:
        return t.permute(0, 1, 3, 2).reshape(B, T * n, H)
    return t.reshape(B, T, H, n, -1).permute(0, 1, 3, 2, 4).reshape(B, T * n, H, -1)


def from_kernel_rows(k: Kernel, t: torch.Tensor, n: Optional[int], gate: bool) -> torch.Tensor:
    """The inverse of to_kernel_rows (a kernel's own backward returns its gradients in its rows)."""
    if k.token_rows is None or k.token_rows["layout"] == "width" or n is None:
        return t
    B, Tn, H = t.shape[:3]
    if gate:
        return t.reshape(B, Tn // n, n, H).permute(0, 1, 3, 2)
    return t.reshape(B, Tn // n, n, H, -1).permute(0, 1, 3, 2, 4).reshape(B, Tn // n, H, -1)


def rows_shape(k: Kernel, canonical: List[int], n: Optional[int], gate: bool) -> List[int]:
    """The shape of one of our [B, T, H, w] tensors in the kernel's rows (before `layout`)."""
    if k.token_rows is None or k.token_rows["layout"] == "width" or n is None:
        return list(canonical)
    B, T, H, w = canonical
    return [B, T * n, H] if gate else [B, T * n, H, w // n]


def to_kernel_token(k: Kernel, t: torch.Tensor) -> torch.Tensor:
    """[B, T, H, d] or gates [B, T, H] -> the kernel's layout."""
    return t.transpose(1, 2).contiguous() if k.layout == "BHTD" else t


def from_kernel_token(k: Kernel, t: torch.Tensor) -> torch.Tensor:
    return t.transpose(1, 2) if k.layout == "BHTD" else t


def to_kernel_state(k: Kernel, t: torch.Tensor) -> torch.Tensor:
    return t.transpose(-1, -2).contiguous() if k.state_layout == "transposed" else t


def from_kernel_state(k: Kernel, t: torch.Tensor) -> torch.Tensor:
    return t.transpose(-1, -2) if k.state_layout == "transposed" else t


def kernel_shape(k: Kernel, canonical: List[int], kind: str) -> List[int]:
    s = list(canonical)
    if kind == "token" and k.layout == "BHTD":
        s[1], s[2] = s[2], s[1]
    if kind == "state" and k.state_layout == "transposed":
        s[-1], s[-2] = s[-2], s[-1]
    return s


def check_tensor(k: Kernel, what: str, t, canonical: List[int], kind: str) -> torch.Tensor:
    want = kernel_shape(k, canonical, kind)
    if not isinstance(t, torch.Tensor):
        raise KernelError(f"{k.spec} returned {what} as {type(t).__name__}, expected a torch.Tensor of shape {want}")
    if list(t.shape) != want:
        raise KernelError(f"{k.spec} returned {what} of shape {list(t.shape)}, expected {want}")
    want_dtype, key, name = (k.state_dtype, "state_dtype", k.state_dtype_name) if kind == "state" else (k.dtype, "dtype", k.dtype_name)
    if t.dtype != want_dtype:
        raise KernelError(f"{k.spec} returned {what} as {t.dtype}, but declares {key} {name} ({want_dtype})")
    if t.device.type != k.device.type:
        raise KernelError(f"{k.spec} returned {what} on {t.device}, inputs were on {k.device}")
    return t
