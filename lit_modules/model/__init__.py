"""Llama-style decoder in plain PyTorch (no Lightning/Hydra imports here)."""

from .config import LlamaConfig
from .counting import count_parameters, flops_per_token
from .init import InitConfig, init_weights
from .transformer import Llama

__all__ = [
    "LlamaConfig",
    "Llama",
    "InitConfig",
    "init_weights",
    "count_parameters",
    "flops_per_token",
]
