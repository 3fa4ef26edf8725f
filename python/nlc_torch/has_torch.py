"""`python -m nlc_torch.has_torch`: exits 0 when torch imports (the suite's probe; through the zygote,
python -m nlc_zygote nlc_torch.has_torch, it costs a fork once torch is imported there)."""
import torch  # noqa: F401
