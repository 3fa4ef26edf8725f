"""delta_product_torch.py's kernel with its steps read in the wrong order, and declarations of
`token_rows` that must be refused (tests/py-token-rows.test.ts):

* `steps_token_minor`: step j of token t read at row j·T + t (all tokens' first steps, then their
  second, ...), where its declaration, and fla, put it at t·n_h + j: fails forward and backward.
* `rows_on_delta`: token_rows declared for a rule with one row per token: a load error naming it.
* `rows_layout_typo`: an unknown layout: a load error naming the key and the layouts.
"""
import functools

from delta_product_torch import DELTA_PRODUCT, delta_product

from fla_deltanet import declared


@functools.wraps(delta_product)
def _token_minor(*args, **kw):
    return delta_product(*args, **kw, token_minor=True)


steps_token_minor = declared(_token_minor, **DELTA_PRODUCT)
rows_on_delta = declared(delta_product, **{**DELTA_PRODUCT, "rules": ["delta"], "log_gates": {}, "absent": ["alpha"]})
rows_layout_typo = declared(delta_product, **{**DELTA_PRODUCT, "token_rows": {"layout": "along_time", "count": "num_householder"}})
