"""nlc_torch: an independent PyTorch implementation of the nl-conformance memory rules and the
MAG + CMS model (spec README D19: forwards only, every gradient from torch.autograd), and the
bridge process through which the TypeScript suite talks to it. f64 throughout."""

PROTOCOL_VERSION = 1

from .declare import declared  # noqa: E402,F401  (the adaptor helper: docs/spec/py-backend.md#conventions)
