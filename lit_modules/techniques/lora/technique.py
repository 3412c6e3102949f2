"""LoRA fine-tuning (vanilla, rsLoRA, PiSSA) as a technique: adapters on chosen projections, the rest frozen.

    python -m lit_modules.train lora=lora init_from=<run id>                 # adapters on a finished run
    python -m lit_modules.finetune base_run=<run id> lora=pissa              # the fixed fine-tune recipe
    python -m lit_modules.train lora=rslora techniques.lora.rank=4 techniques.lora.targets=[q_proj,v_proj]

The adapters attach in `transform_loaded_model`, i.e. once the starting weights are in place (after
initialization and after `init_from`'s weights are loaded), so PiSSA factors the weights being fine-tuned.
Every other parameter is frozen (requires_grad=False: it is in no optimizer group and keeps no state). For
evaluation and export the adapters are merged into plain weights (`prepare_for_inference`). The math and the
variants are in `adapter.py`. Not implemented: adapters on the embedding, the LM head or a mixture of
experts' FFN (refused), adapter dropout.

Decay, Muon and MoLS see the factors as families of their own (lora_qk, lora_vo, lora_attn_gate, lora_mlp):
they take no weight decay unless techniques.lora.decay=true (then optim.weight_decay, as any 2-D weight under
optim.wd_exclude), stay with AdamW under optim=muon (Muon's orthogonalized update is not defined for a rank-r
factor pair in the sources), and are MoLS groups when techniques.mols.modules names them.

No decay by default, as the fine-tune recipes (conf/finetune/) already train: decay pulls the factors to 0,
i.e. towards the base for LoRA's B A, and for PiSSA, whose factors hold the principal part of the pre-trained
weight, it shrinks the model itself. No source fixes the choice for every variant: tagged
fidelity.lora.decay=assumed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import nn
from torch.nn.utils import parametrize

from lit_modules.config.technique_context import TechniqueContext
from lit_modules.optim.param_groups import GroupSpec
from lit_modules.techniques.base import Technique
from lit_modules.techniques.lora.adapter import attach, merge, scaling_of
from lit_modules.techniques.lora.settings import TARGET_PATHS, LoraSettings

ADAPTER_FAMILY_PREFIX = "lora_"  # optim/param_groups.py: lora_qk, lora_vo, lora_attn_gate, lora_mlp


def _targeted(model: nn.Module, targets: Sequence[str]) -> list[tuple[str, nn.Module]]:
    suffixes = tuple(TARGET_PATHS[t] for t in targets)
    return [(name, m) for name, m in model.named_modules() if isinstance(m, nn.Linear) and name.endswith(suffixes)]


class Lora(Technique):
    Settings = LoraSettings
    settings: LoraSettings

    def problems(self, cfg: Any = None, context: TechniqueContext | None = None) -> list[str]:
        p = self.settings_problems()
        if p or cfg is None:
            return p
        if not cfg.get("init_from") and not self.settings.from_scratch:
            p.append(
                "LoRA adapts a trained model and this run starts from a fresh initialization; pass "
                "init_from=<run id or checkpoint> (or fine-tune with lit_modules.finetune), or set "
                "techniques.lora.from_scratch=true to adapt the initialized weights on purpose."
            )
        model = (context or TechniqueContext.of(cfg)).model_as_trained(without=self.name)
        if model is not None:
            p += self.structure_problems(model)
        return p

    def structure_problems(self, model: nn.Module) -> list[str]:
        s = self.settings
        ffn = [t for t in s.targets if TARGET_PATHS[t].startswith("mlp.")]
        if ffn and getattr(getattr(model, "cfg", None), "is_moe", False):
            return [f"LoRA adapters on a mixture of experts' FFN ({', '.join(ffn)}) are not implemented; keep "
                    "techniques.lora.targets to the attention projections (q_proj, k_proj, v_proj, o_proj)."]
        targeted = _targeted(model, s.targets)
        if not targeted:
            return [f"techniques.lora.targets {', '.join(s.targets)} match no Linear of this model."]
        for name, linear in targeted:
            if parametrize.is_parametrized(linear, "weight"):
                return [
                    f"LoRA adapts plain weights, and {name}.weight is already parametrized (e.g. by the PC layer); "
                    "merge it first (python -m lit_modules.export plain) or keep it out of techniques.lora.targets."
                ]
            if linear.bias is not None:
                return [f"LoRA here adapts bias-free Linears, and {name} has a bias."]
            if s.rank > min(linear.weight.shape):
                return [
                    f"techniques.lora.rank={s.rank} exceeds the smaller side of {name}.weight "
                    f"{tuple(linear.weight.shape)}; use a rank of at most {min(linear.weight.shape)}."
                ]
        return []

    # ------------------------------------------------------------------ hooks

    def transform_loaded_model(self, model: nn.Module) -> nn.Module:
        problems = self.structure_problems(model)
        if problems:
            raise ValueError(problems[0])
        for param in model.parameters():
            param.requires_grad_(False)
        s = self.settings
        generator = torch.Generator().manual_seed(s.seed)  # A's draws are the same for a seed, on any device
        for _, linear in _targeted(model, s.targets):
            attach(linear, s.rank, float(s.alpha), s.variant, generator)
        return model

    def edit_param_groups(self, groups: list[GroupSpec]) -> None:
        """The adapter factors' groups take no weight decay unless techniques.lora.decay=true."""
        if self.settings.decay:
            return
        for group in groups:
            if group.family.startswith(ADAPTER_FAMILY_PREFIX) and group.decayed:
                group.decayed, group.name = False, f"{group.family}.no_decay"

    def prepare_for_inference(self, model: nn.Module) -> nn.Module:
        return merge(model)

    def tags(self) -> dict[str, str]:
        s = self.settings
        return {
            "lora.variant": s.variant,
            "lora.rank": str(s.rank),
            "lora.alpha": str(s.alpha),
            "lora.scaling": f"{scaling_of(s.variant, s.rank, float(s.alpha)):.6g}",
            "lora.targets": ",".join(s.targets),
            "lora.decay": str(s.decay).lower(),
            "fidelity.lora.decay": "assumed",
        }
