"""Wrong `intermediates` declarations (docs/spec/precision.md#intermediates): each is an error at
load naming the field."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "py-kernels"))
import deltanet_lowprec as lp  # noqa: E402

# f32 storage has no lower dtype to keep intermediates in
f32_storage = lp.kernel(lp._recurrent, lp.torch.float32, "f32")
# the field names where intermediates are kept, not a dtype
named_dtype = lp.kernel(lp._recurrent, lp.torch.bfloat16, "bf16", intermediates="bf16")
