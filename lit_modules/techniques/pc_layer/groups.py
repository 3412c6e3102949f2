"""PC layers grouped by shape in the forward: one batched polynomial per group (the refresh batches its power
iteration the same way, `parametrization.refresh_all`).

A group is a shape up to transposition (`stacked.py`): a model has few (Llama's FFN + O: gate/up/down, o_proj;
two at any depth), so a step makes the same number of torch calls at 6 layers as at 48 (the per-layer version
made ~65 per matrix, which on a GPU are as many kernel launches).

Forward: `batch_by_shape(model)` (the technique calls it) registers a pre-hook and a hook on the model. The
pre-hook computes every group's effective weights in one stacked computation (`stacked.py`) and
hands each parametrization its slice; `<linear>.weight` (the parametrization's forward) then returns that slice
instead of computing its own. The hook takes the slices back when the forward ends, except in a model whose
blocks are activation-checkpointed: a block recomputes during the backward with the very same weights, so they
stay, valid only while their inputs are unchanged, until the backward ends or the next refresh. A weight read
otherwise (diagnostics after a step, merge, a model without the hooks) is computed alone, by the same code on a
stack of one. Parameter names, buffers and state dicts are
unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn
from torch.nn.utils import parametrize

from lit_modules.activation_checkpointing import CheckpointedForward
from lit_modules.techniques.pc_layer.parametrization import PCParametrization, pc_modules, raw_weight
from lit_modules.techniques.pc_layer.stacked import is_flipped, oriented, stacked_normalized, stacked_preconditioned


@dataclass
class ShapeGroup:
    """PC-parametrized Linears that one batched computation serves: same shape up to transposition, dtype,
    device and knobs. The `tall` first members enter as they are, the others (wide) transposed."""

    modules: list[nn.Module] = field(default_factory=list)
    pcs: list[PCParametrization] = field(default_factory=list)
    tall: int = 0

    def effective(self) -> list[torch.Tensor]:
        """Each member's gamma * sg(sigma) * p(W / sigma) in its own shape, differentiable in raw weights and
        gammas, from one stacked computation."""
        pc, tall = self.pcs[0], self.tall
        wn, sigma = self._normalized()
        gamma = torch.stack([p.gamma for p in self.pcs]) if pc.gamma is not None else None
        stacked = stacked_preconditioned(wn, sigma, gamma, pc.level, pc.recover_norm)
        # One unbind (its backward stacks the members' gradients once); the wide ones as transposed views.
        return [e if k < tall else e.mT for k, e in enumerate(stacked.unbind(0))]

    def _normalized(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(W / sigma, sigma) of the stacked raw weights; the stack itself is freed when this returns."""
        tall = self.tall
        w = oriented([raw_weight(m) for m in self.modules], tall)
        u = torch.stack([p.u if k < tall else p.v for k, p in enumerate(self.pcs)])  # w's left vectors
        v = torch.stack([p.v if k < tall else p.u for k, p in enumerate(self.pcs)])
        return stacked_normalized(w, u, v, self.pcs[0].eps)


def _forward_key(module: nn.Module, pc: PCParametrization) -> tuple:
    w = raw_weight(module)
    return (tuple(sorted(w.shape, reverse=True)), w.dtype, w.device, pc.level, pc.recover_norm, pc.eps,
            pc.gamma is None, None if pc.gamma is None else (pc.gamma.dtype, pc.gamma.device), pc.u.dtype,
            pc.u.device)


def _grouped(pairs: list[tuple[nn.Module, PCParametrization]]) -> list[ShapeGroup]:
    groups: dict[tuple, ShapeGroup] = {}
    # Tall members first: the wide ones (transposed in the stack) are one block at the end.
    for module, pc in sorted(pairs, key=lambda pair: is_flipped(raw_weight(pair[0]).shape)):
        group = groups.setdefault(_forward_key(module, pc), ShapeGroup())
        group.modules.append(module)
        group.pcs.append(pc)
        group.tall += not is_flipped(raw_weight(module).shape)
    return list(groups.values())


def sole_pc(module: nn.Module) -> PCParametrization | None:
    """The module's PC parametrization when it is its weight's only one (so its input is the raw weight)."""
    if not parametrize.is_parametrized(module, "weight"):
        return None
    chain = module.parametrizations.weight
    return chain[0] if len(chain) == 1 and isinstance(chain[0], PCParametrization) else None


def forward_groups(model: nn.Module) -> list[ShapeGroup]:
    """Shape groups of the PC layers whose effective weight the batched forward can compute (PC alone on the
    weight; a PC behind another parametrization is computed alone, as before)."""
    pairs = [(m, pc) for _, m, pc in pc_modules(model) if sole_pc(m) is pc]
    return _grouped(pairs)


class ShapeBatches:
    """The forward pre-hook and hook of `batch_by_shape`: the groups' effective weights, computed together."""

    def __init__(self) -> None:
        self.groups: list[ShapeGroup] | None = None
        self.recomputes = False  # whether some block recomputes its forward in the backward (checkpointing)

    def _current(self, model: nn.Module) -> list[ShapeGroup]:
        # Rebuilt when a member lost its PC or got another parametrization (merge, export); a Python check only.
        groups = self.groups
        if groups is None or any(sole_pc(m) is not pc for g in groups for m, pc in zip(g.modules, g.pcs)):
            self.groups = forward_groups(model)
            self.recomputes = any(isinstance(vars(m).get("forward"), CheckpointedForward) for m in model.modules())
        return self.groups

    def before(self, model: nn.Module, args) -> None:
        for group in self._current(model):
            for pc, weight in zip(group.pcs, group.effective()):
                pc.stacked_weight = weight
                pc.stacked_versions = None  # inside the forward: current by construction

    @torch.compiler.disable  # bookkeeping only, eager (the forward's graph stays whole)
    def after(self, model: nn.Module, args, output) -> None:
        # An activation-checkpointed block recomputes its forward during the backward and must read the very
        # weights it used: with a graph to backpropagate they are kept, valid while raw weight, u, v and gamma
        # are unchanged (version counters: an optimizer step, a refresh or a rescale moves them). Otherwise they
        # go now, so each layer's weight is freed as soon as its own backward has used it.
        keep = self.recomputes and torch.is_grad_enabled()
        for group in self.groups or ():
            for module, pc in zip(group.modules, group.pcs):
                if keep and pc.stacked_weight is not None:
                    pc.stacked_versions = pc.versions(raw_weight(module))
                else:
                    pc.stacked_weight = None


def batch_by_shape(model: nn.Module) -> ShapeBatches:
    """Compute the PC layers' effective weights of `model` by shape group in its forward (idempotent)."""
    batches = model.__dict__.get("_pc_shape_batches")
    if batches is None:
        batches = ShapeBatches()
        model.register_forward_pre_hook(batches.before)
        model.register_forward_hook(batches.after, always_call=True)  # also when the forward raises
        model.__dict__["_pc_shape_batches"] = batches
    batches.groups = None
    return batches


__all__ = ["ShapeBatches", "ShapeGroup", "batch_by_shape", "forward_groups", "sole_pc"]
