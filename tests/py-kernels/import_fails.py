"""A kernel module that cannot be imported (tests/py-backend.test.ts)."""
raise ImportError("misbehaving module: triton is not installed (simulated)")


def kernel(**kw):  # never reached
    pass
