"""PC layer: polynomial weight preconditioning (Wang et al., arXiv 2606.06470), as a technique plug-in.

Selected Linear weights are trained through W_eff = gamma * sg(sigma) * p(W / sigma), sigma = u^T W v
from a streaming power iteration (see `parametrization.py`, `polynomials.py`, `refresh.py`).
Defaults follow the official release: level 4 with AdamW (level 2 with Muon, `conf/pc_layer/level2.yaml`),
norm recovery on, one learnable gamma per matrix (init 1), 10 power iterations after every optimizer
step, eps 1e-7, targets FFN (gate, up, down) + attention o_proj. Merge for inference:
`prepare_for_inference` (= `merge.merge_pc`); export of a checkpoint: `python -m lit_modules.export`.

    python -m lit_modules.train pc_layer=level4                   # AdamW (the paper's AdamW level)
    python -m lit_modules.train pc_layer=level2 optim=muon        # Muon (the paper's Muon level)
    python -m lit_modules.train pc_layer=level4 techniques.pc_layer.recover_norm=false
"""

from __future__ import annotations

import re

from typing import TYPE_CHECKING

from torch import nn

from lit_modules.optim.param_groups import GroupSpec
from lit_modules.techniques.base import Technique
from lit_modules.techniques.pc_layer.groups import batch_by_shape
from lit_modules.techniques.pc_layer.merge import DEFAULT_MERGE_ITERS, merge_pc
from lit_modules.techniques.pc_layer.parametrization import attach_pc
from lit_modules.techniques.pc_layer.polynomials import PAPER_LEVEL_FOR_OPTIMIZER
from lit_modules.techniques.pc_layer.settings import DEFAULT_TARGETS, TARGET_PATHS, PCLayerSettings

if TYPE_CHECKING:  # Lightning loads when the refresh callback is built, not when validation asks
    import lightning as L

__all__ = ["DEFAULT_TARGETS", "TARGET_PATHS", "PCLayer", "is_pc_gamma"]
GAMMA_GROUP_SUFFIX = ".pc_gamma"


def is_pc_gamma(param_name: str) -> bool:
    return ".parametrizations.weight." in param_name and param_name.endswith(".gamma")


class PCLayer(Technique):
    Settings = PCLayerSettings
    settings: PCLayerSettings

    def problems(self, cfg=None, context=None) -> list[str]:
        p = self.settings_problems()
        if cfg is not None and cfg.trainer.strategy == "fsdp":
            p.append(
                "The PC layer's power-iteration refresh needs whole weights and FSDP shards them; use ddp."
            )
        return p

    # --- hooks ----------------------------------------------------------------------------------

    def _is_target(self, name: str) -> bool:
        targets = self.settings.targets
        suffixes = {TARGET_PATHS[t] for t in targets}
        if any(name == s or name.endswith("." + s) for s in suffixes):
            return True
        ffn = [TARGET_PATHS[t].split(".")[-1] for t in targets if TARGET_PATHS[t].startswith("mlp.")]
        return self.settings.experts and bool(re.search(rf"\.mlp\.(experts\.\d+|shared)\.({'|'.join(ffn)})$", name)) \
            if ffn else False

    def transform_model(self, model: nn.Module) -> nn.Module:
        s = self.settings
        matched = 0
        for name, module in list(model.named_modules()):
            if isinstance(module, nn.Linear) and self._is_target(name):
                attach_pc(
                    module,
                    name,
                    level=s.level,
                    recover_norm=s.recover_norm,
                    learnable_gamma=s.learnable_gamma,
                    eps=s.eps,
                )
                matched += 1
        if matched == 0:
            raise ValueError(
                f"The PC layer found none of its targets ({', '.join(s.targets)}) in the model."
            )
        batch_by_shape(model)  # each shape group's effective weights in one batched computation per forward
        return model

    def edit_param_groups(self, groups: list[GroupSpec]) -> None:
        """Move the gammas (1-element tensors) into groups of their own, same family and decay.

        Why: with optim=muon a family group goes to Muon only when ALL its params are 2-D, so a gamma
        sharing the `mlp` group with the raw 2-D weights would send the whole group to AdamW. Split,
        the raw weights (`...parametrizations.weight.original`) stay with Muon and the gammas go to
        AdamW, as in the release (its Muon takes 2-D params only).
        """
        extra: list[tuple[int, GroupSpec]] = []
        for index, group in enumerate(groups):
            picks = [i for i, n in enumerate(group.param_names) if is_pc_gamma(n)]
            if not picks or len(picks) == len(group.params):
                continue
            moved = GroupSpec(
                name=group.name + GAMMA_GROUP_SUFFIX,
                family=group.family,
                decayed=group.decayed,
                lr_scale=group.lr_scale,
            )
            for i in reversed(picks):
                moved.params.insert(0, group.params.pop(i))
                moved.param_names.insert(0, group.param_names.pop(i))
            extra.append((index + 1, moved))
        for offset, (position, moved) in enumerate(extra):
            groups.insert(position + offset, moved)

    def prepare_for_inference(self, model: nn.Module) -> nn.Module:
        """Merge gamma * sg(sigma) * p(W / sigma) into plain Linear weights, in place, after refreshing u, v
        with extra power iterations on the final weights: inference then costs what the baseline costs.
        Call it on a copy (`copy.deepcopy`) to keep training the parametrized model."""
        return merge_pc(model, refresh_iters=DEFAULT_MERGE_ITERS)

    def callbacks(self) -> list[L.Callback]:
        from lit_modules.techniques.pc_layer.refresh import PowerIterationRefresh

        return [PowerIterationRefresh(self.settings.power_iters)]

    def tags(self) -> dict[str, str]:
        s = self.settings
        return {
            "pc.level": str(s.level),
            "pc.targets": ",".join(s.targets),
            "pc.recover_norm": str(s.recover_norm).lower(),
            "pc.learnable_gamma": str(s.learnable_gamma).lower(),
            "pc.power_iters": str(s.power_iters),
            **({"pc.experts": "true"} if s.experts else {}),
            "fidelity.pc_layer.coefficients": "confirmed",  # hard-coded table of the official code
            "fidelity.pc_layer.sigma_gradient": "confirmed",  # u^T W v with autograd through W
            # Refreshed after every optimizer step (confirmed); on resume the checkpoint's u, v are kept.
            "fidelity.pc_layer.refresh_schedule": "confirmed",
            # The polynomial runs in the forward's compute dtype (autocast under bf16-mixed); the
            # release computes in the parameter dtype under FSDP mixed precision (bf16) too.
            "pc.compute_dtype": "autocast",
            "fidelity.pc_layer.compute_dtype": "assumed",
            # u, v random init seeded by the module path (the release uses the global RNG).
            "fidelity.pc_layer.uv_init": "assumed",
            "pc.gamma_group": "separate",
            "pc.paper_level_adamw": str(PAPER_LEVEL_FOR_OPTIMIZER["adamw"]),
            "pc.paper_level_muon": str(PAPER_LEVEL_FOR_OPTIMIZER["muon"]),
        }
