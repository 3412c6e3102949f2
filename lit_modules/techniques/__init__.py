"""Technique plug-ins: one file per paper, each a `Technique` selected by a Hydra group."""

from lit_modules.techniques.base import Technique

__all__ = ["Technique"]
