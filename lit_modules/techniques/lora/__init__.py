"""LoRA fine-tuning (vanilla LoRA, rsLoRA, PiSSA): the technique and its adapter math.

`_target_: lit_modules.techniques.lora.Lora` (conf/lora/*.yaml) builds the technique; its claim is data in
`report.yaml` beside it.
"""

from lit_modules.techniques.lora.technique import Lora

__all__ = ["Lora"]
