"""`declared(fn, **decl)`: a kernel callable carrying its nl-conformance declaration
(docs/spec/py-backend.md#conventions), for an adaptor that declares a library's own function
without wrapping it in arithmetic:

    from nlc_torch import declared
    chunk_gated_delta_rule = declared(ops.chunk_gated_delta_rule, rules=["gated_delta"], ...)

The kernel host puts this folder (python/) on the adaptor's import path; an adaptor imported
elsewhere (its own tests) adds `<nl-conformance>/python` to PYTHONPATH. Imports nothing but the
standard library, so importing it costs nothing and needs no torch.
"""
import functools

__all__ = ["declared"]


def declared(fn, **decl):
    """`fn` itself (same signature, name and docstring) with `decl` as its `nlc` declaration.
    A callable that already carries a declaration keeps it, updated by `decl`."""
    if not callable(fn):
        raise TypeError(f"declared(): expected a callable kernel, got {fn!r}")

    @functools.wraps(fn)
    def kernel(*args, **kwargs):
        return fn(*args, **kwargs)

    kernel.nlc = {**getattr(fn, "nlc", {}), **decl}
    return kernel
