"""What happens to the optimizer state of a weight that WISCA rescaled (UNCONFIRMED in the paper).

For W' = S * W (S elementwise: a scalar, or a per-row / per-column vector, all positive) the loss in the
new coordinates is L'(W') = L(W' / S), so its gradient is g' = g / S. Every optimizer state that is a
running average of gradients is linear in them, so the state the optimizer WOULD hold had it seen the same
function-space gradient history in the new coordinates is:

    first moments   (AdamW/NAdam/LAMB exp_avg, Muon momentum_buffer):  m' = m / S
    second moments  (AdamW/NAdam/LAMB exp_avg_sq, max_exp_avg_sq):     v' = v / S^2
    step counter, NAdam's mu_product (the running product of its       unchanged
    momentum schedule: a scalar of the step count, not of gradients):

Policies:
- keep:    leave the state as it is (what in-place edits of `param.data` do; our guess of the paper).
- rescale: apply the map above. Consequence for AdamW: m'/sqrt(v') = m/sqrt(v) exactly (up to eps), so
           each entry of W' moves by the same amount the same entry of W would have moved.
- reset:   zero the moment tensors of the rescaled weights and keep `step` (and `mu_product`). With the
           step kept, Adam's bias correction is ~1 after many steps, so the first update after a reset has
           per-entry size (1 - beta1) / sqrt(1 - beta2) (0.45 for betas (0.9, 0.95); 3.2 for (0.9, 0.999))
           before it settles; other weights' state is untouched.
AdamW's decoupled weight decay W <- (1 - lr*wd) W commutes with an elementwise rescale, so it needs no
adjustment.
"""

from __future__ import annotations

import torch

from lit_modules.techniques.wisca.rescales import Rescale

OPT_STATE_POLICIES = ("keep", "rescale", "reset")
FIRST_MOMENT_KEYS = ("exp_avg", "momentum_buffer")
SECOND_MOMENT_KEYS = ("exp_avg_sq", "max_exp_avg_sq")
COUNTER_KEYS = ("step", "mu_product")  # functions of the step count alone, the same in any coordinates


def leaf_optimizers(optimizer: torch.optim.Optimizer) -> list[torch.optim.Optimizer]:
    """A CompositeOptimizer (Muon + AdamW) exposes its children as `.optimizers`; a plain one is itself."""
    children = getattr(optimizer, "optimizers", None)
    return list(children) if children else [optimizer]


def _apply_to_state(state: dict, factor: torch.Tensor, policy: str) -> None:
    moments = {k: v for k, v in state.items() if k not in COUNTER_KEYS}
    # An unknown entry is an error, checked before any change, so a policy is never half-applied.
    for key, value in moments.items():
        if not torch.is_tensor(value) or key not in FIRST_MOMENT_KEYS + SECOND_MOMENT_KEYS:
            raise ValueError(f"WISCA has no rule for optimizer state '{key}' (opt_state={policy}).")
    for key, value in moments.items():
        if policy == "reset":
            value.zero_()
        else:
            power = 1 if key in FIRST_MOMENT_KEYS else 2
            value.div_(factor.to(dtype=value.dtype, device=value.device) ** power)


@torch.no_grad()
def apply_opt_state_policy(
    optimizer: torch.optim.Optimizer | None, rescales: list[Rescale], policy: str
) -> int:
    """Update the state of every rescaled weight per `policy`; returns how many weights had state."""
    if policy not in OPT_STATE_POLICIES:
        raise ValueError(f"opt_state must be one of {OPT_STATE_POLICIES}, not '{policy}'.")
    if policy == "keep" or optimizer is None:
        return 0
    touched = 0
    for child in leaf_optimizers(optimizer):
        for r in rescales:
            state = child.state.get(r.param)
            if state:
                _apply_to_state(state, r.factor, policy)
                touched += 1
    return touched
