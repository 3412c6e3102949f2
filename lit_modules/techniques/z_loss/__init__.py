"""z-loss (PaLM, Chowdhery et al. 2022, section 5): an auxiliary loss that keeps the softmax normalizer near 1.

`_target_: lit_modules.techniques.z_loss.ZLoss` (conf/z_loss/default.yaml) builds the technique; its
diagnostic (`logit_normalizer`) is in lit_modules/diagnostics/logit_normalizer.py and its claim and figures in report.yaml.
"""

from lit_modules.techniques.z_loss.technique import ZLoss

__all__ = ["ZLoss"]
