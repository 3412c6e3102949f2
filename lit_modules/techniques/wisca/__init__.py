"""WISCA (arXiv 2508.16676): the technique, its rescale math, its optimizer-state policy and its callback.

`_target_: lit_modules.techniques.wisca.Wisca` (conf/wisca/*.yaml) builds the technique; its claim and
figures are data in `report.yaml` beside it.
"""

from lit_modules.techniques.wisca.technique import Wisca

__all__ = ["Wisca"]
