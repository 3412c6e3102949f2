"""One rank of the FSDP clipping check (tests/lit_modules/distributed/test_fsdp_clip.py), started by torchrun.

    python -m torch.distributed.run --standalone --nproc_per_node=2 -m tests.helpers.fsdp_clip_ranks OUT MAX_NORM

Each rank wraps the platform's CausalLMModule in FSDP on the CPU (gloo; one unit per block, as
distributed/strategy.py wraps it), attaches it to a real Lightning Trainer with the FSDP strategy, takes the
gradient of its half of one batch, clips through the module's `configure_gradient_clipping` (what Lightning's
automatic optimization calls before each optimizer step), and rank 0 writes the clipped full gradients and
the pre-clip norm to OUT.
"""

from __future__ import annotations

import sys

import lightning as L
import torch
import torch.distributed as dist
from lightning.pytorch.plugins.precision import FSDPPrecision
from torch.distributed.fsdp import FullyShardedDataParallel
from torch.distributed.fsdp.wrap import ModuleWrapPolicy

from lit_modules.lm_module import CausalLMModule
from lit_modules.model import Llama, LlamaConfig
from lit_modules.model.transformer import Block

CONFIG = LlamaConfig(vocab_size=64, d_model=32, n_layers=2, n_heads=4, d_ff=64, max_seq_len=16)


def model_and_batch() -> tuple[Llama, torch.Tensor, torch.Tensor]:
    """The same weights and the same 8-sequence batch on every rank and in the test's own reference."""
    torch.manual_seed(0)
    model = Llama(CONFIG)
    tokens = torch.randint(0, CONFIG.vocab_size, (8, 17), generator=torch.Generator().manual_seed(1))
    return model, tokens[:, :-1], tokens[:, 1:]


def main(out: str, max_norm: float) -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    model, x, y = model_and_batch()
    module = CausalLMModule(model, optimizer_factory=lambda m: torch.optim.SGD(m.parameters(), lr=0.0),
                            schedule_factory=lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda _: 1.0))
    root = FullyShardedDataParallel(module, auto_wrap_policy=ModuleWrapPolicy({Block}), device_id=torch.device("cpu"),
                                    use_orig_params=True)  # as Lightning's FSDP strategy wraps it
    # Lightning's FSDP strategy refuses the CPU, so DDP's holds the FSDP root, with FSDP's precision plugin (the
    # one that refuses norm clipping): a clip that fell back to Lightning's would raise there.
    trainer = L.Trainer(accelerator="cpu", devices=world, strategy="ddp", plugins=[FSDPPrecision("32-true")],
                        logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    trainer.strategy.model = root  # what the FSDP strategy holds once it has wrapped the module
    module.trainer = trainer
    half = slice(rank * 4, rank * 4 + 4)  # FSDP averages the ranks' gradients: the mean over the whole batch
    module._next_token_loss(root(x[half]), y[half]).backward()
    with FullyShardedDataParallel.summon_full_params(root, with_grads=True):
        before = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in root.parameters()]))
    module.configure_gradient_clipping(torch.optim.SGD(root.parameters(), lr=0.0), max_norm, "norm")
    with FullyShardedDataParallel.summon_full_params(root, with_grads=True):
        grads = {name.replace("_fsdp_wrapped_module.", ""): p.grad.clone() for name, p in root.named_parameters()}
    if rank == 0:
        torch.save({"norm_before": before, "grads": grads}, out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]))
