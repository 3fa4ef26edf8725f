"""kda_torch.py's kernel declared with the in-kernel gate forms, with one bug each; each must fail
(tests/py-fla-vocabulary.test.ts); the last three are declarations wrong in themselves:

* every head reads head 0's A_log and dt_bias;
* beta declared sigmoid2 (in (0, 2)) where the kernel computes sigmoid: the declaration is wrong;
* the state declared value-first without passing the constant (the kernel stores it key-first).
"""
import functools

from kda_torch import GATE_IN_KERNEL, KDA, NEG_EIGVAL, kda

from fla_deltanet import declared

kda_head0_params = declared(functools.partial(kda, head_param=0), **KDA, **GATE_IN_KERNEL)
kda_sigmoid_as_neg_eigval = declared(kda, **KDA, names=NEG_EIGVAL["names"],
                                     gate_forms={**NEG_EIGVAL["gate_forms"], "theta": {"form": "sigmoid2", "flag": "use_beta_sigmoid_in_kernel"}})
kda_v_first_undeclared = declared(kda, **{**KDA, "state_layout": "ours"}, names={"theta": "beta"}, log_gates={"alpha": "g"}, bounded=["theta"])

# declarations that are wrong in themselves: errors naming the key
kda_form_and_log_gate = declared(kda, **KDA, names={"theta": "beta"}, log_gates={"alpha": "g"}, gate_forms=GATE_IN_KERNEL["gate_forms"])
kda_constant_collides = declared(kda, **KDA, names={"theta": "beta"}, log_gates={"alpha": "g"}, bounded=["theta"], constants={"scale": 1.0})
kda_input_dtype_typo = declared(kda, **KDA, **GATE_IN_KERNEL, dtype="bf16", input_dtypes={"alpah": "f32"})
