"""The model built on the meta device, for its parameter counts and tensor shapes: no memory, no compute.

    model = meta_llama(cfg)        # a Llama whose parameters are meta tensors (its RoPE tables real, small)

Initialization is skipped while it is built: a meta tensor holds no values to fill, and on the meta device
torch routes fills such as normal_ through its reference kernels, whose first call imports torch._dynamo
(~2 s before a bad config could be refused). The fillers of torch.nn.init that the built-in modules'
reset_parameters call are no-ops for the build only (main thread: config validation), restored on exit.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

from .config import LlamaConfig
from .transformer import Llama

_INIT_FILLERS = ("normal_", "uniform_", "kaiming_uniform_", "kaiming_normal_", "xavier_uniform_", "xavier_normal_",
                 "trunc_normal_", "ones_", "zeros_", "constant_")


@contextmanager
def _no_init_fills():
    saved = {name: getattr(torch.nn.init, name) for name in _INIT_FILLERS}
    try:
        for name in _INIT_FILLERS:
            setattr(torch.nn.init, name, lambda tensor, *args, **kwargs: tensor)
        yield
    finally:
        for name, fill in saved.items():
            setattr(torch.nn.init, name, fill)


def meta_llama(cfg: LlamaConfig | dict) -> Llama:
    """`Llama(cfg)` on the meta device, nothing initialized (its config's own checks still raise)."""
    with torch.device("meta"), _no_init_fills():
        return Llama(cfg)
