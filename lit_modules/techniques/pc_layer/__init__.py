"""PC layer (arXiv 2606.06470): the technique, its polynomials, parametrization, refresh callback, merge,
cost model, checkpoint export and benchmark rows.

`_target_: lit_modules.techniques.pc_layer.PCLayer` (conf/pc_layer/*.yaml) builds the technique; its claim
and figures are data in `report.yaml` beside it.
"""

from lit_modules.techniques.pc_layer.technique import PCLayer

__all__ = ["PCLayer"]
