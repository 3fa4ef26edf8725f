"""The `forward_only` declaration (docs/spec/py-backend.md#forward-only): the naive Delta kernel
declared forward-only, and two declarations that must not load."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "py-kernels"))
from naive_delta import naive_delta  # noqa: E402


def _wrap(decl):
    def kernel(q, k, v, forget, beta, scale=None, initial_state=None, output_final_state=False):
        return naive_delta(q, k, v, forget, beta, scale=scale, initial_state=initial_state, output_final_state=output_final_state)
    kernel.nlc = {**naive_delta.nlc, **decl}
    return kernel


declared = _wrap({"forward_only": True})
not_a_bool = _wrap({"forward_only": "yes"})


class WithBackward:
    """Declares forward-only yet has a backward method: a contradiction, refused at load."""
    nlc = {**naive_delta.nlc, "forward_only": True}

    def __call__(self, **kw):
        return naive_delta(**kw)

    def backward(self, **kw):
        raise AssertionError("never called")
