"""Merge PC-parametrized weights into plain Linear weights, so inference costs what the baseline costs.

W_eff = gamma * sg(sigma) * p(W / sigma) is computed once per matrix, by shape group as the training forward
does (gamma INCLUDED: the release's `svd_analyzer.apply_pc_transform` drops it, a pitfall papers.md warns
about) after refreshing u, v with extra power iterations on the final W, then written into
`<linear>.weight` and the parametrization is removed. The merged model's state_dict has the baseline's
keys, so it loads into a plain `Llama`.
"""

from __future__ import annotations

import torch
from torch import nn

from lit_modules.techniques.pc_layer.groups import forward_groups, sole_pc
from lit_modules.techniques.pc_layer.parametrization import pc_modules, raw_weight, refresh_all

DEFAULT_MERGE_ITERS = 100  # extra warm-started iterations on the final weights before merging


@torch.no_grad()
def merge_pc(model: nn.Module, refresh_iters: int = DEFAULT_MERGE_ITERS) -> nn.Module:
    """Replace every PC parametrization in `model` (in place) by its effective weight; returns `model`.

    `refresh_iters=0` merges with the current u, v, i.e. exactly the function the model computes now.
    """
    if refresh_iters > 0:
        refresh_all(model, refresh_iters)
    found = pc_modules(model)
    for name, module, _ in found:
        if sole_pc(module) is None:
            raise ValueError(
                f"{name} has other parametrizations besides PC on its weight; remove them first."
            )
    effective: dict[int, torch.Tensor] = {}
    for group in forward_groups(model):  # by shape group, as the model's forward computes them
        original = raw_weight(group.modules[0])
        with torch.autocast(device_type=original.device.type, enabled=False):
            for module, weight in zip(group.modules, group.effective()):
                effective[id(module)] = weight.detach().clone()  # gamma * sg(sigma) * p(W / sigma)
    for _, module, _ in found:
        _unparametrize(module)
        module.weight.copy_(effective[id(module)])
    return model


def _unparametrize(module: nn.Module) -> None:
    """Turn a parametrized Linear back into its plain class, keeping the raw Parameter object.

    Not `parametrize.remove_parametrizations`: it deletes the `weight` property from the module's
    injected class, and `copy.deepcopy` shares that class between copies, so merging a deep copy would
    break the original model (a test covers this).
    """
    original = module.parametrizations.weight.original
    plain_class = type(module).__bases__[0]  # parametrize injects a subclass of the module's class
    del module.parametrizations
    module.__class__ = plain_class
    module.register_parameter("weight", original)


__all__ = ["DEFAULT_MERGE_ITERS", "merge_pc"]
