"""Planted wrong variants of deltanet_lowprec.py (they must FAIL the `py:` checks; the forward of
each is correct, its backward is not):

* `<form>_delta_<dtype>_dbeta_scaled`: the step size's gradient (dβ, our dθ) scaled by 1 + 1/128,
  through an autograd.Function on β whose backward scales in f32 and rounds to the storage dtype;
* `<form>_delta_<dtype>_dk_dropped`: one term of dk dropped: the keys the prediction kᵀS reads
  (recurrent) or that K Kᵀ reads (chunked) are detached, so no gradient flows back through them.
* `<form>_delta_<dtype>_dbeta_1003`: dβ scaled by 1.003 (as `dbeta_scaled`, a smaller factor);
* `chunk_delta_<dtype>_handoff`: the state handed from one chunk to the next scaled by 1 + 1/128
  (forward and backward wrong from the second chunk on; the last chunk's state is not scaled).

<form> is `recurrent` or `chunk`, <dtype> `bf16` or `f16`.
"""
import functools

import torch

import deltanet_lowprec as lp  # the adaptor's own folder is on sys.path


class _ScaledGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, factor=1 + 1 / 128):
        ctx.factor = factor
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return (g.float() * ctx.factor).to(g.dtype), None


def _planted(step, low, dtype, plant, **extra):
    if plant == "dk_dropped":
        step = functools.partial(step, read=lambda k: k.detach())
    if plant == "handoff":
        step = functools.partial(step, handoff=1 + 1 / 128)
    correct = lp.kernel(step, low, dtype, **extra)

    def delta_rule(q, k, v, beta, scale=None, initial_state=None, output_final_state=False, use_qk_l2norm_in_kernel=False):
        if plant == "dbeta_scaled":
            beta = _ScaledGrad.apply(beta)
        if plant == "dbeta_1003":
            beta = _ScaledGrad.apply(beta, 1.003)
        return correct(q, k, v, beta, scale=scale, initial_state=initial_state, output_final_state=output_final_state,
                       use_qk_l2norm_in_kernel=use_qk_l2norm_in_kernel)
    delta_rule.nlc = correct.nlc
    return delta_rule


FORMS = {"recurrent": (lp._recurrent, {}), "chunk": (lp._chunked, {"chunk_size": lp.CHUNK})}
DTYPES = {"bf16": torch.bfloat16, "f16": torch.float16}
for _form, (_step, _extra) in FORMS.items():
    for _dtype, _low in DTYPES.items():
        for _plant in ("dbeta_scaled", "dk_dropped", "dbeta_1003") + (("handoff",) if _form == "chunk" else ()):
            globals()[f"{_form}_delta_{_dtype}_{_plant}"] = _planted(_step, _low, _dtype, _plant, **_extra)
