"""The `jax:` kind's adaptor (docs/kernels.md#jax): a JAX function or Pallas kernel, declared with
an `nlc` dict exactly as a `py:` kernel is, as the torch-convention kernel the kernel host calls
(docs/spec/py-backend.md#contract):

* the forward takes the host's keywords, torch tensors in, and returns torch tensors: every tensor
  crosses by DLPack (copied on both sides, so a guarded input is read, never aliased), a bf16 or
  f16 tensor in its own dtype, everything else (scale, flags, `rule`) as it is;
* the explicit `backward(..., dy, d_final_state)` is `jax.vjp` of the forward at the same keywords:
  the gradient of every floating-point tensor argument, the initial state's included, by keyword.
  A JAX kernel with its own `jax.custom_vjp` is judged on that backward; one declared
  `forward_only` gets none.

The kernel host reaches it as `<this file>:<module>#<callable>` (the `jax:` kind builds that name,
conformance/backend-kinds.ts): the module-level `__getattr__` below imports `<module>` (a dotted
name or a path to a .py file, as for `py:`) and wraps its `<callable>`.
"""
import functools
import importlib
import importlib.util
import inspect
import os
import sys

__all__ = ["jax_kernel"]


def _jax():
    try:
        import jax  # noqa: F401
        import jax.numpy  # noqa: F401
        import jax.dlpack  # noqa: F401
    except Exception as e:  # the reason the kind is skipped
        raise ImportError(f"jax is not importable by {sys.executable} ({type(e).__name__}: {e}); "
                          "install jax and jaxlib for it, or name a Python that has them in NLC_TORCH_PYTHON") from None
    return jax


def _to_jax(t):
    import torch
    jax = _jax()
    if not isinstance(t, torch.Tensor):
        return t
    return jax.dlpack.from_dlpack(t.detach().cpu().contiguous().clone())


def _to_torch(x, device):
    import torch
    jax = _jax()
    if not isinstance(x, jax.Array):
        return x
    return torch.utils.dlpack.from_dlpack(jax.numpy.array(x, copy=True)).clone().to(device)


def _tree(fn, x):
    """`fn` on every leaf of the (y, final state) shapes a kernel takes and returns: tuples, lists, dicts, None."""
    if isinstance(x, dict):
        return {n: _tree(fn, v) for n, v in x.items()}
    if isinstance(x, (tuple, list)):
        return type(x)(_tree(fn, v) for v in x)
    return None if x is None else fn(x)


def _device(kw):
    import torch
    for v in kw.values():
        for leaf in (v.values() if isinstance(v, dict) else [v]):
            if isinstance(leaf, torch.Tensor):
                return leaf.device
    return torch.device("cpu")


def _differentiable(x) -> bool:
    jax = _jax()
    return isinstance(x, jax.Array) and jax.numpy.issubdtype(x.dtype, jax.numpy.floating)


def _split(kw):
    """The array arguments (traced) and the rest (compile-time constants: scale, flags, rule, config)."""
    jax = _jax()
    is_array = lambda v: isinstance(v, jax.Array) or (isinstance(v, dict) and v and all(isinstance(x, jax.Array) for x in v.values()))
    return {n: v for n, v in kw.items() if is_array(v)}, {n: v for n, v in kw.items() if not is_array(v)}


_JITTED = {}


def _jitted(fn, phase, statics):
    """`fn`'s forward (arrays -> outputs) or its VJP ((fixed, wrt, cotangent) -> gradients of wrt) at
    these constants, compiled once per shape (the cases of one check share a handful of shapes)."""
    jax = _jax()
    key = (fn, phase, repr(sorted(statics.items(), key=lambda kv: kv[0])))
    if key not in _JITTED:
        if phase == "forward":
            _JITTED[key] = jax.jit(lambda arrays: fn(**arrays, **statics))
        else:
            def vjp(args):
                fixed, wrt, cot = args
                return jax.vjp(lambda w: fn(**fixed, **statics, **w), wrt)[1](cot)[0]
            _JITTED[key] = jax.jit(vjp)
    return _JITTED[key]


def jax_kernel(fn, spec: str = None):
    """`fn` (a JAX function carrying its `nlc` declaration) as a torch-convention kernel with an explicit backward."""
    decl = getattr(fn, "nlc", None)
    who = spec or getattr(fn, "__name__", repr(fn))

    @functools.wraps(fn)
    def forward(**kw):
        device = _device(kw)
        arrays, statics = _split({n: _tree(_to_jax, v) for n, v in kw.items()})
        out = _jitted(fn, "forward", statics)(arrays)
        return _tree(lambda x: _to_torch(x, device), out)

    if isinstance(decl, dict) and decl.get("forward_only", False):
        return forward

    # the host calls an explicit backward without the output-final-state flag: asked for here, so
    # the forward differentiated returns the final state d_final_state is the cotangent of
    flag = decl.get("output_final_state") if isinstance(decl, dict) else None
    try:
        takes_flag = flag is not None and flag in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        takes_flag = False

    def backward(dy=None, d_final_state=None, **kw):
        jax = _jax()
        device = _device(kw)
        if takes_flag:
            kw[flag] = True
        arrays, statics = _split({n: _tree(_to_jax, v) for n, v in kw.items()})
        # the differentiated arguments: every floating-point tensor (a dict of states entry by entry)
        wrt = {n: v for n, v in arrays.items()
               if _differentiable(v) or (isinstance(v, dict) and v and all(_differentiable(x) for x in v.values()))}
        fixed = {n: v for n, v in arrays.items() if n not in wrt}
        out = _jitted(fn, "forward", statics)(arrays)
        frozen = not isinstance(out, (tuple, list))
        y = out if frozen else out[0]
        cot_y = jax.numpy.zeros_like(y) if dy is None else _to_jax(dy).astype(y.dtype)
        if frozen:
            cot = cot_y
        else:
            fin = out[1]
            given = _tree(_to_jax, d_final_state)

            def cot_state(f, g):
                return jax.numpy.zeros_like(f) if g is None else g.astype(f.dtype)
            if isinstance(fin, dict):
                cot_fin = {n: cot_state(f, (given or {}).get(n)) for n, f in fin.items()}
            else:
                cot_fin = None if fin is None else cot_state(fin, given)
            cot = type(out)([cot_y, cot_fin, *[_tree(jax.numpy.zeros_like, o) for o in out[2:]]])
        grads = _jitted(fn, "backward", statics)((fixed, wrt, cot))
        return _tree(lambda x: _to_torch(x, device), grads)

    forward.backward = backward
    forward.nlc_jax = who
    return forward


def _import(module: str):
    if module.endswith(".py") or os.sep in module:
        file = os.path.abspath(module)
        if not os.path.isfile(file):
            raise ImportError(f"jax kernel module {file} does not exist")
        folder = os.path.dirname(file)
        if folder not in sys.path:  # the module's own folder first, so it imports its siblings
            sys.path.insert(0, folder)
        name = "nlc_jax_kernel_" + os.path.splitext(os.path.basename(file))[0]
        spec = importlib.util.spec_from_file_location(name, file)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
        return mod
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    return importlib.import_module(module)


@functools.lru_cache(maxsize=None)
def __getattr__(name: str):
    """`<module>#<callable>`: that module's JAX callable, wrapped (docs/kernels.md#jax)."""
    module, sep, attr = name.rpartition("#")
    if not sep or not module or not attr:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r} (expected '<module>#<callable>')")
    _jax()  # no JAX: the reason, before the module's own import fails on it
    fn = getattr(_import(module), attr, None)
    if fn is None:
        raise AttributeError(f"jax kernel module {module!r} has no attribute {attr!r}")
    if not callable(fn):
        raise TypeError(f"{module}:{attr} is not callable")
    return jax_kernel(fn, f"{module}:{attr}")
