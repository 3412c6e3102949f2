"""One optimizer object that steps several (e.g. Muon for hidden matrices + AdamW for the rest).

Lightning's automatic optimization, gradient clipping, LR schedulers and checkpointing all see a single
optimizer whose `param_groups` are the children's groups (the same dict objects, so an LR written by
the scheduler reaches the child that uses it).
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import torch


class CompositeOptimizer(torch.optim.Optimizer):
    def __init__(self, optimizers: list[torch.optim.Optimizer]):
        if not optimizers:
            raise ValueError("CompositeOptimizer needs at least one optimizer.")
        self.optimizers = optimizers
        self.defaults: dict[str, Any] = {}
        self._optimizer_step_pre_hooks = {}
        self._optimizer_step_post_hooks = {}
        self._optimizer_state_dict_pre_hooks = {}
        self._optimizer_state_dict_post_hooks = {}
        self._optimizer_load_state_dict_pre_hooks = {}
        self._optimizer_load_state_dict_post_hooks = {}

    @property
    def param_groups(self) -> list[dict]:  # type: ignore[override]
        return [g for opt in self.optimizers for g in opt.param_groups]

    @property
    def state(self) -> dict:  # type: ignore[override]
        merged: dict = {}
        for opt in self.optimizers:
            merged.update(opt.state)
        return merged

    @torch.no_grad()
    def step(self, closure: Optional[Callable[[], Any]] = None) -> Any:  # type: ignore[override]
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for opt in self.optimizers:
            opt.step()
        return loss

    def zero_grad(self, set_to_none: bool = True) -> None:
        for opt in self.optimizers:
            opt.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict:  # type: ignore[override]
        return {"children": [opt.state_dict() for opt in self.optimizers]}

    def load_state_dict(self, state_dict: dict) -> None:  # type: ignore[override]
        children = state_dict["children"]
        if len(children) != len(self.optimizers):
            raise ValueError("The checkpoint's optimizer has a different number of parts than this run's.")
        for opt, sd in zip(self.optimizers, children):
            opt.load_state_dict(sd)

    def __repr__(self) -> str:
        return "CompositeOptimizer(" + ", ".join(type(o).__name__ for o in self.optimizers) + ")"
