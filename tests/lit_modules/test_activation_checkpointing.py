"""trainer.activation_checkpointing recomputes each block in the backward pass: the same loss and gradients, the
same parameter names and state dict, the same run (its config hash too); and FSDP wraps one unit per block."""

from __future__ import annotations

import copy
from pathlib import Path

import torch
from omegaconf import OmegaConf

from lit_modules.activation_checkpointing import CheckpointedForward, checkpoint_blocks
from lit_modules.config.composition import compose_run_config
from lit_modules.distributed.strategy import lightning_strategy
from lit_modules.model import Llama, LlamaConfig
from lit_modules.model.transformer import Block
from lit_modules.train import run
from tests.helpers.runs import tiny_overrides


def _loss_and_grads(model: Llama, idx: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    model.zero_grad()
    loss = model(idx).float().logsumexp(-1).mean()
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


def test_checkpointed_blocks_give_the_same_loss_and_gradients_under_the_same_names() -> None:
    torch.manual_seed(0)
    plain = Llama(LlamaConfig(vocab_size=97, d_model=32, n_layers=3, n_heads=4, d_ff=64, max_seq_len=16))
    checkpointed = copy.deepcopy(plain)
    assert checkpoint_blocks(checkpointed) == 3
    idx = torch.randint(0, 97, (2, 16))
    loss, grads = _loss_and_grads(plain, idx)
    loss_c, grads_c = _loss_and_grads(checkpointed, idx)
    assert torch.equal(loss, loss_c) and grads.keys() == grads_c.keys()
    assert all(torch.allclose(grads[n], grads_c[n], atol=1e-6) for n in grads)
    assert plain.state_dict().keys() == checkpointed.state_dict().keys()
    copied = copy.deepcopy(checkpointed)  # evaluation deep-copies the model: the copy checkpoints itself
    block = copied.layers[0]
    assert isinstance(block.forward, CheckpointedForward) and block.forward.block is block
    with torch.no_grad():  # no graph wanted: a plain forward
        assert torch.equal(copied(idx), plain(idx))


def test_a_run_with_checkpointing_trains_like_one_without(tmp_path: Path) -> None:
    plain = run(compose_run_config(tiny_overrides(tmp_path / "a", steps=10)))
    ckpt = run(compose_run_config(tiny_overrides(tmp_path / "b", steps=10, **{"trainer.activation_checkpointing": "true"})))
    assert ckpt.status == plain.status == "FINISHED"
    assert abs(ckpt.metrics["val/loss"] - plain.metrics["val/loss"]) < 1e-5
    assert ckpt.config_hash == plain.config_hash  # memory, not computation: the same identity


def test_fsdp_wraps_one_unit_per_block() -> None:
    strategy = lightning_strategy(OmegaConf.create({"strategy": "fsdp"}))
    assert strategy.kwargs["auto_wrap_policy"].__class__.__name__ == "ModuleWrapPolicy"
    assert Block in strategy.kwargs["auto_wrap_policy"]._module_classes
    assert lightning_strategy(compose_run_config(["trainer=ddp"]).trainer) == "ddp_spawn"
