"""Optimizer + schedule from the config and the tagged parameter groups.

The optimizer is the one `optim.name` registers (lit_modules/optim/registry.py): each lives in its own module
here (adamw.py, muon.py, nadam.py, lamb.py, adam_mini.py), with its settings and its builder.
"""

from __future__ import annotations

from typing import Callable, Iterable

import torch
from torch import nn

from lit_modules.optim.param_groups import GroupSpec, build_group_specs
from lit_modules.optim.registry import optimizer_spec
from lit_modules.optim.schedules import GroupScaledSchedule, schedule_fn

GroupEditor = Callable[[list[GroupSpec]], None]


def build_optimizer(
    model: nn.Module, optim_cfg, group_editors: Iterable[GroupEditor] = ()
) -> torch.optim.Optimizer:
    specs = build_group_specs(model, optim_cfg.wd_exclude)
    for edit in group_editors:
        edit(specs)
    return optimizer_spec(optim_cfg.name).build(specs, optim_cfg, model)


def optimizer_tags(optim_cfg) -> dict[str, str]:
    """Run tags for the optimizer's choices no reference fixes (LAMB: where its trust ratio applies)."""
    spec = optimizer_spec(optim_cfg.name)
    return spec.tags(optim_cfg) if spec.tags is not None else {}


def build_schedule(optimizer: torch.optim.Optimizer, schedule_cfg, steps: int, warmup: int) -> GroupScaledSchedule:
    fn = schedule_fn(schedule_cfg.name, steps, warmup, schedule_cfg.min_lr_ratio, schedule_cfg.decay_fraction)
    return GroupScaledSchedule(optimizer, fn)
