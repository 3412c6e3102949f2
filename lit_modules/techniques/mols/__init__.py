"""MoLS (arXiv 2605.05794): the technique, its module groups, SNR estimator, LR scaling and callback.

`_target_: lit_modules.techniques.mols.MoLS` (conf/mols/*.yaml) builds the technique; its claim and figures
are data in `report.yaml` beside it.
"""

from lit_modules.techniques.mols.technique import MoLS

__all__ = ["MoLS"]
