"""The OmegaConf resolvers run configs may use, registered wherever a config is composed or resolved.

    ablation.arm: 'baseline@lr${rate_text:${optim.lr}}'   # one grid of several rates names each cell by its own

A learning-rate grid run as one Hydra multirun (`optim.lr=3e-3,6e-3`) needs each cell's arm name to follow its
rate; with this resolver the name is the one the single-rate form writes out (`baseline@lr6e-3`), so the run,
its tags and its config hash are the same either way.
"""

from __future__ import annotations

from omegaconf import OmegaConf

from lit_modules.config.ladder import ladder_tokens


def rate_text(rate: float) -> str:
    """A rate as the LR variants spell it: 0.0015 -> '1.5e-3', 0.003 -> '3e-3', 0.012 -> '1.2e-2'."""
    mantissa, exponent = f"{float(rate):.6e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


RESOLVERS = {"rate_text": rate_text, "ladder_tokens": ladder_tokens}  # ladder_tokens: config/ladder.py


def register_resolvers() -> None:
    """Idempotent: every process that composes or resolves a run config calls it (Hydra's worker processes too)."""
    for name, function in RESOLVERS.items():
        if not OmegaConf.has_resolver(name):
            OmegaConf.register_new_resolver(name, function)
