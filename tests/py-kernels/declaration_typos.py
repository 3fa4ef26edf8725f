"""Declarations with a typo, made with `declared()` (python/nlc_torch/declare.py) as an adaptor
would: a rule name that is not in the registry, and a key that is not a declaration key. Each
backend is unavailable with one message naming the nearest right spelling
(tests/declaration-typo.test.ts)."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "py-kernels"))
from naive_delta import naive_delta  # noqa: E402
from nlc_torch import declared  # noqa: E402

typo_rule = declared(naive_delta, rules=["gated-delta"])
typo_key = declared(naive_delta, chunk_sise=16)
