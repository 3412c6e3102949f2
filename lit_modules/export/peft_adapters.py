"""A LoRA / rsLoRA / PiSSA run's adapters alone, in PEFT's format, with the base model they apply to.

    <folder>/adapter/        adapter_config.json + adapter_model.safetensors
    <folder>/adapter_base/   the frozen weights the adapters were trained on, as a Hugging Face folder

`peft.PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained("<folder>/adapter_base"), "<folder>/adapter")`
computes what the merged model in <folder> computes. The base is the run's own frozen tensors: for LoRA and
rsLoRA the weights it started from, for PiSSA the residual W - scaling * B @ A (what PiSSA's factors need).
Our factors are PEFT's: lora_A [r, d_in], lora_B [d_out, r], scaling alpha / r (rsLoRA: alpha / sqrt r).
Other techniques' inference forms (e.g. a PC-merged FFN) are applied to the base first.
"""

from __future__ import annotations

import json
from pathlib import Path

from torch.nn.utils import parametrize

from lit_modules.build import build_techniques
from lit_modules.export.hf_model import write_hf_model
from lit_modules.export.source import ExportSource, refuse_parametrized
from lit_modules.export.tokenizer_files import TokenIds
from lit_modules.hf.folder import write_weights
from lit_modules.hf.names import hf_name
from lit_modules.rebuild import rebuild_model
from lit_modules.techniques.lora.adapter import adapters

LORA = "lora"  # the technique's registered name
ADAPTER_DIR, BASE_DIR = "adapter", "adapter_base"


def has_adapters(source: ExportSource) -> bool:
    return any(t.name == LORA for t in build_techniques(source.config))


def write_peft_adapters(source: ExportSource, weights: dict, folder: Path, final_folder: Path, ids: TokenIds) -> None:
    """`folder/adapter` and `folder/adapter_base` (see the module docstring); `final_folder` is where `folder`
    will be renamed to, recorded as the adapters' base_model_name_or_path."""
    cfg = source.config
    techniques = build_techniques(cfg)
    [lora] = [t for t in techniques if t.name == LORA]
    model = rebuild_model(cfg, weights, for_inference=False)
    for technique in techniques:
        if technique.name != LORA:
            model = technique.prepare_for_inference(model)
    tensors, targets = {}, set()
    for path, adapter in adapters(model):
        name = hf_name(path)
        targets.add(name.rsplit(".", 1)[-1])
        tensors[f"base_model.model.{name}.lora_A.weight"] = adapter.lora_A
        tensors[f"base_model.model.{name}.lora_B.weight"] = adapter.lora_B
    for path, _ in adapters(model):
        # The frozen original (base or PiSSA residual) becomes the weight again; the factors leave.
        parametrize.remove_parametrizations(model.get_submodule(path), "weight", leave_parametrized=False)
    refuse_parametrized(model, source.reference)
    base = folder / BASE_DIR
    base.mkdir()
    write_hf_model(model.eval(), base, ids)
    adapter_dir = folder / ADAPTER_DIR
    adapter_dir.mkdir()
    write_weights(tensors, adapter_dir / "adapter_model.safetensors")
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": str(Path(final_folder).resolve() / BASE_DIR),
        "r": lora.settings.rank,
        "lora_alpha": float(lora.settings.alpha),
        "lora_dropout": 0.0,
        "target_modules": sorted(targets),
        "bias": "none",
        "use_rslora": lora.settings.variant == "rslora",
        "use_dora": False,
        "fan_in_fan_out": False,
        # PiSSA's factors are already split off the residual base: loading must not split them again.
        "init_lora_weights": True,
        "modules_to_save": None,
        "inference_mode": True,
    }
    (adapter_dir / "adapter_config.json").write_text(json.dumps(config, indent=2) + "\n")
