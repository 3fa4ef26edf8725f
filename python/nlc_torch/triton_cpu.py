"""Triton kernels on a CPU (docs/spec/py-backend.md#triton-cpu): what the kernel host adds to Triton's
interpreter (TRITON_INTERPRET=1) so that a kernel interpreted there computes what it computes on a
GPU, or is refused with the reason. Measured on Triton 3.8:

- bf16 values are held as their raw 16-bit patterns (numpy uint16), and the interpreter's
  arithmetic, comparisons, dots and math functions run on those integers: a bf16 kernel that does
  arithmetic in bf16 (fla's chunked kernels: their dots take bf16 operands) returns garbage,
  up to 1e13 times the bound. Here every such operation converts its bf16 operands exactly to f32,
  computes in f32 (a dot: exact products, f32 sums, as a GPU's bf16 dot does; a sum, min, max or
  scan: in f32, rounded once) and rounds a bf16 result to nearest even; the f32 -> bf16 cast rounds
  to nearest even too (the interpreter truncates, where a GPU rounds).
- A loop over the builtin `range` or `tl.range` gives Python ints, where a compiled kernel's loop
  variable is an int32 scalar tensor: `i_t.to(tl.int64)` (fla's chunked kernels) fails with
  "'int' object has no attribute 'to'". Here the loop variables of a kernel's dynamic loops are
  int32 scalar tensors (`tl.static_range` keeps Python ints, as compiled).
- The interpreter runs Triton's builtins by patching them as attributes of `triton.language`; a
  builtin the kernel's module binds under its own name (fla's `gather = tl.gather`, which its chunked
  DPLR kernels call) is called unpatched and fails with "Did you forget to add @triton.jit ?". Here
  such globals of the kernel's module are called as the interpreter calls the ones it patches.
- Atomic read-modify-writes on bf16 and every fp8 arithmetic stay unsupported: a kernel that
  reaches one is refused (TritonCpuRefused), never run on raw bit patterns.

Installed once by the kernel host after it imports the kernel's module, only where that module
imported Triton and the interpreter is on.
"""
from __future__ import annotations

import functools
import os
import sys

import numpy as np

_installed = False


class TritonCpuRefused(RuntimeError):
    """A Triton operation the interpreter cannot compute correctly on this CPU."""


def interpreted() -> bool:
    """Triton imported, with its interpreter on."""
    return "triton" in sys.modules and os.environ.get("TRITON_INTERPRET") == "1"


def bf16_to_f32(u: np.ndarray) -> np.ndarray:
    return (np.asarray(u, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def f32_to_bf16(x: np.ndarray) -> np.ndarray:
    """f32 -> bf16 bit patterns, rounded to nearest even; NaN stays a (quiet) NaN."""
    x = np.asarray(x, dtype=np.float32)
    b = x.view(np.uint32).astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(x)
    if np.any(nan):
        r = np.where(nan, ((b >> 16) | 0x40).astype(np.uint16), r)
    return r


def install() -> bool:
    """Patches the interpreter's builder; False where Triton is not imported or not interpreted."""
    global _installed
    if _installed:
        return True
    if not interpreted():
        return False
    import triton.language as tl
    from triton.runtime import interpreter as I

    B = I.InterpreterBuilder
    BF16 = tl.bfloat16

    def is_bf16(h) -> bool:
        return h.dtype.scalar == BF16

    def f32(h):
        return bf16_to_f32(h.data) if is_bf16(h) else h.data

    def back(out, tl_dtype):
        """A result in the element type `tl_dtype`: bf16 rounded back, booleans (comparisons) as they are."""
        if tl_dtype == BF16 and out.dtype.kind == "f":
            return f32_to_bf16(out)
        return out

    def refuse_fp8(*hs):
        for h in hs:
            if getattr(h.dtype.scalar, "primitive_bitwidth", 0) == 8 and h.dtype.scalar.is_floating():
                raise TritonCpuRefused(f"Triton's interpreter computes {h.dtype.scalar} on its raw bit patterns; "
                                       "fp8 arithmetic is not supported on a CPU: judge this kernel on a GPU")

    binary_op, unary_op, ternary_op = B.binary_op, B.unary_op, B.ternary_op
    cast_impl, fp_to_fp, dot, fma, rmw, cas = B.cast_impl, B.create_fp_to_fp, B.create_dot, B.create_fma, B.create_atomic_rmw, B.create_atomic_cas

    def bf_binary(self, lhs, rhs, op):
        if not (is_bf16(lhs) or is_bf16(rhs)):
            refuse_fp8(lhs, rhs)
            return binary_op(self, lhs, rhs, op)
        return I.TensorHandle(back(op(f32(lhs), f32(rhs)), lhs.dtype.scalar), lhs.dtype.scalar)

    def bf_unary(self, arg, op):
        if not is_bf16(arg):
            refuse_fp8(arg)
            return unary_op(self, arg, op)
        return I.TensorHandle(back(op(f32(arg)), BF16), BF16)

    def bf_ternary(self, lhs, rhs, other, op):
        if op is np.where or not any(is_bf16(h) for h in (lhs, rhs, other)):
            return ternary_op(self, lhs, rhs, other, op)  # a select moves bit patterns: exact as it is
        return I.TensorHandle(back(op(f32(lhs), f32(rhs), f32(other)), other.dtype.scalar), other.dtype.scalar)

    def bf_fma(self, x, y, z):
        if not any(is_bf16(h) for h in (x, y, z)):
            return fma(self, x, y, z)
        return I.TensorHandle(back(f32(x) * f32(y) + f32(z), z.dtype.scalar), z.dtype.scalar)

    def bf_cast(self, src, dst_type):
        s, d = src.dtype.scalar, dst_type.scalar
        if s == BF16 and d != BF16:
            x = bf16_to_f32(src.data)
            return I.TensorHandle(x if d == tl.float32 else x.astype(I._get_np_dtype(dst_type)), d)
        if d == BF16 and s != BF16:
            return I.TensorHandle(f32_to_bf16(src.data.astype(np.float32)), d)
        return cast_impl(self, src, dst_type)

    def bf_fp_to_fp(self, src, dst_type, rounding_mode):
        s, d = src.dtype.scalar, dst_type.scalar
        rtz = rounding_mode is not None and rounding_mode == I._ir.ROUNDING_MODE.RTZ
        if (s == BF16 or d == BF16) and not rtz and tl.float8e5 not in (s, d) and 8 not in (s.primitive_bitwidth, d.primitive_bitwidth):
            return bf_cast(self, src, dst_type)
        return fp_to_fp(self, src, dst_type, rounding_mode)

    def bf_dot(self, a, b, d, input_precision, max_num_imprecise_acc):
        if not (is_bf16(a) or is_bf16(b)):
            return dot(self, a, b, d, input_precision, max_num_imprecise_acc)
        acc = f32(d)
        out = np.matmul(f32(a).astype(np.float32), f32(b).astype(np.float32), dtype=np.float32) + acc
        return I.TensorHandle(back(out, d.dtype.scalar), d.dtype.scalar)

    def bf_rmw(self, rmwOp, ptr, val, mask, sem, scope):
        if is_bf16(val):
            raise TritonCpuRefused("Triton's interpreter computes atomic bf16 read-modify-writes on raw bit patterns: "
                                   "not supported on a CPU: judge this kernel on a GPU")
        return rmw(self, rmwOp, ptr, val, mask, sem, scope)

    def bf_cas(self, ptr, cmp, val, sem, scope):
        if is_bf16(val):
            raise TritonCpuRefused("Triton's interpreter compares bf16 atomically on raw bit patterns: not supported on a CPU")
        return cas(self, ptr, cmp, val, sem, scope)

    B.binary_op, B.unary_op, B.ternary_op, B.create_fma = bf_binary, bf_unary, bf_ternary, bf_fma
    B.cast_impl, B.create_fp_to_fp, B.create_dot = bf_cast, bf_fp_to_fp, bf_dot
    B.create_atomic_rmw, B.create_atomic_cas = bf_rmw, bf_cas
    # the methods bound by name when the class was made (create_fadd = lambda ...: self.binary_op(...))
    # reach the patched ones through self; create_rsqrt and create_erf compute directly:
    create_rsqrt, create_erf = B.create_rsqrt, B.create_erf
    B.create_rsqrt = lambda self, arg: bf_unary(self, arg, lambda x: 1 / np.sqrt(x)) if is_bf16(arg) else create_rsqrt(self, arg)
    B.create_erf = lambda self, arg: (I.TensorHandle(f32_to_bf16(I.np_erf_fp32(bf16_to_f32(arg.data))), BF16) if is_bf16(arg)
                                      else create_erf(self, arg))

    # reductions and scans that call numpy on the data directly (sum, min, max, arg-min/max, cumsum,
    # cumprod): on bf16 values in f32, a bf16 result rounded once
    R, S = I.ReduceOps, I.ScanOps
    r_sum, r_min_max, s_cumsum, s_cumprod = R.sum, R.min_max, S.cumsum, S.cumprod

    def scalar_of(t):
        return t.dtype.scalar if hasattr(t.dtype, "scalar") else t.dtype

    def bf_sum(self, input):
        if scalar_of(input) != BF16:
            return r_sum(self, input)
        out = np.sum(bf16_to_f32(input.handle.data), axis=self.axis, keepdims=self.keep_dims, dtype=np.float32)
        return self.to_tensor(f32_to_bf16(np.asarray(out, dtype=np.float32)), input.dtype)

    def bf_min_max(self, input, val_reduce_op, idx_reduce_op=None):
        x = input[0] if isinstance(input, tuple) else input
        if scalar_of(x) != BF16:
            return r_min_max(self, input, val_reduce_op, idx_reduce_op)
        data = bf16_to_f32(x.handle.data)
        val = None if not val_reduce_op else self.to_tensor(
            f32_to_bf16(np.asarray(val_reduce_op(data, axis=self.axis, keepdims=self.keep_dims), dtype=np.float32)), x.dtype)
        idx = None if not idx_reduce_op else self.to_tensor(idx_reduce_op(data, axis=self.axis, keepdims=self.keep_dims), tl.int32)
        if val is not None and idx is not None:
            return val, idx
        return val if val is not None else idx

    def scan(orig, op):
        def run(self, input):
            if scalar_of(input) != BF16:
                return orig(self, input)
            out = op(bf16_to_f32(input.handle.data), axis=self.axis, dtype=np.float32)
            return [self.to_tensor(f32_to_bf16(out), dtype=input.dtype)]
        return run

    R.sum, R.min_max = bf_sum, bf_min_max
    S.cumsum, S.cumprod = scan(s_cumsum, np.cumsum), scan(s_cumprod, np.cumprod)

    # loop variables: int32 scalar tensors, as a compiled kernel's
    def tensor_range(arg1, arg2=None, step=None, **kwargs):
        start, end = (0, arg1) if arg2 is None else (arg1, arg2)
        for i in range(int(start), int(end), 1 if step is None else int(step)):
            yield tl.tensor(I.TensorHandle(np.array([i], dtype=np.int32), tl.int32), tl.int32)

    def interpreted_builtin(member, *args, **kwargs):
        """A builtin called as the interpreter calls the ones it patches: with its semantic."""
        kwargs.pop("_semantic", None)
        return member(*args, **kwargs, _semantic=I.interpreter_semantic)

    static_range = I._patch_lang_core

    def patch_lang_core(lang, scope):
        static_range(lang, scope)
        plain = lang.static_range  # the interpreter's own: Python ints, right for a static loop
        scope.set_attr(lang, "range", tensor_range)
        scope.set_attr(lang, "static_range", plain)

    I._patch_lang_core = patch_lang_core
    patch_lang = I._patch_lang

    def _patch_lang(fn):
        scope = patch_lang(fn)
        g = fn.__globals__
        missing = object()
        # the loop variables; and Triton builtins the kernel's module binds under a name of its own
        # (fla: `gather = tl.gather`), which the interpreter patches only as attributes of tl
        saved = {"range": g.get("range", missing)}
        g["range"] = tensor_range
        for name, member in list(g.items()):
            if name != "range" and not isinstance(member, type) and tl.core.is_builtin(member):
                saved[name] = member
                g[name] = functools.partial(interpreted_builtin, member)
        restore = scope.restore

        def undo():
            restore()
            for name, old in saved.items():
                if old is missing:
                    g.pop(name, None)
                else:
                    g[name] = old
        scope.restore = undo
        return scope

    I._patch_lang = _patch_lang
    _installed = True
    return True
