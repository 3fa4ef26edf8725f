"""Misbehaving kernels for the py: backend's reliability tests (tests/py-backend.test.ts): each is
the naive delta kernel of examples/py-kernels with one fault. Every fault must become an `error`
check naming the case (or a skip, for a declared dtype that is not judged: f64), and the run goes on.
"""
import os
import stat
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "py-kernels"))
from naive_delta import naive_delta  # noqa: E402
from naive_delta_bf16 import naive_delta_bf16  # noqa: E402

DECL = naive_delta.nlc


def _declared(fn, **changes):
    fn.nlc = {**DECL, **changes}
    return fn


def _sig(fn):
    """The keyword signature of naive_delta, so the host passes exactly its inputs."""
    def kernel(q, k, v, forget, beta, scale=None, initial_state=None, output_final_state=False):
        return fn(q=q, k=k, v=v, forget=forget, beta=beta, scale=scale, initial_state=initial_state,
                  output_final_state=output_final_state)
    return kernel


def _dies(**kw):
    sys.stderr.write("misbehaving kernel: about to exit the process\n")
    sys.stderr.flush()
    os._exit(3)


def _hangs(**kw):
    sys.stderr.write("misbehaving kernel: sleeping forever\n")
    sys.stderr.flush()
    time.sleep(3600)


def _raises(**kw):
    raise RuntimeError("misbehaving kernel: CUDA error: an illegal memory access was encountered (simulated)")


def _chatty(**kw):
    """Correct, but prints to stdout three ways: none of it may reach the protocol stream."""
    print("misbehaving kernel: print() to stdout")
    sys.__stdout__.write("misbehaving kernel: sys.__stdout__\n")
    sys.__stdout__.flush()
    os.write(1, b"misbehaving kernel: os.write(1)\n")
    return naive_delta(**kw)


def _garbage_stream(**kw):
    """Writes garbage into every pipe or socket it can find, the protocol's private descriptor included."""
    for fd in range(3, 256):
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
                os.write(fd, b"\x00garbage, not a protocol header\n")
        except OSError:
            pass
    return naive_delta(**kw)


def _wrong_shape(**kw):
    o, S = naive_delta(**kw)
    return o.transpose(1, 2), S          # [B, H, T, d] while declaring [B, T, H, d]


def _wrong_dtype(**kw):
    o, S = naive_delta(**kw)
    return o.double(), S


def _no_tuple(**kw):
    return naive_delta(**kw)[0]


dies = _declared(_sig(_dies))
hangs = _declared(_sig(_hangs))
raises = _declared(_sig(_raises))
chatty = _declared(_sig(_chatty))
garbage_stream = _declared(_sig(_garbage_stream))
wrong_shape = _declared(_sig(_wrong_shape))
wrong_dtype = _declared(_sig(_wrong_dtype))
no_tuple = _declared(_sig(_no_tuple))


def _state_in_bf16(**kw):
    """A bf16 kernel that returns its final state in bf16 while declaring state_dtype f32."""
    o, S = naive_delta_bf16(**kw)
    return o, S.to(torch.bfloat16)


state_in_bf16 = _declared(_sig(_state_in_bf16), dtype="bf16", state_dtype="f32")
f64 = _declared(_sig(naive_delta), dtype="f64")
