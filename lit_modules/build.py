"""From a validated config to the objects a run needs: techniques, data, model, module, callbacks.

Each function is one arrow of the data flow; nothing here reads Hydra state or opens a run.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable

import lightning as L
import torch
from omegaconf import DictConfig, OmegaConf
from torch import nn

from lit_modules.activation_checkpointing import checkpoint_blocks
from lit_modules.callbacks.checkpoint_io import VerifiedCheckpointIO
from lit_modules.callbacks.checkpointing import LastCheckpoint
from lit_modules.callbacks.diagnostics import DiagnosticsLogger
from lit_modules.callbacks.divergence import DivergenceGuard
from lit_modules.callbacks.progress import TokenProgress
from lit_modules.callbacks.run_record import RunRecord
from lit_modules.callbacks.throughput import Throughput
from lit_modules.callbacks.validation_replay import ValidationReplay
from lit_modules.config.budget import Budget
from lit_modules.config.errors import ConfigError
from lit_modules.config.technique_context import instantiate_techniques
from lit_modules.data import LMDataModule, build_tokenizer, prepare_corpus, prepare_shards
from lit_modules.distributed.strategy import lightning_strategy
from lit_modules.hook_profiler import NoProfiler
from lit_modules.lm_module import CausalLMModule
from lit_modules.model import Llama, init_weights
from lit_modules.optim.build import build_optimizer, build_schedule
from lit_modules.techniques.base import Technique


def build_techniques(cfg: DictConfig) -> list[Technique]:
    """The techniques of a config that is not validated again (a finished run's recorded config); a run
    being started gets them from `validated(cfg).techniques`, built and checked once."""
    built, problems = instantiate_techniques(cfg)
    if problems:
        raise ConfigError("\n".join(problems))
    return built


@dataclass
class DataBundle:
    tokenizer: object
    datamodule: L.LightningDataModule
    fingerprint: str  # the run's data_fingerprint tag
    bytes_per_token: float | None  # of the held-out text; None where it is not plain text (SFT pairs)
    corpus: object | None = None  # text corpora only: what evaluation reads
    shards: object | None = None


def build_data(cfg: DictConfig) -> DataBundle:
    data_cfg = OmegaConf.to_object(cfg.data)
    if data_cfg.source == "sft":
        from lit_modules.data.sft import prepare_sft_data

        tokenizer = build_tokenizer(OmegaConf.to_object(cfg.tokenizer))  # byte or pretrained: validated
        sft = prepare_sft_data(data_cfg, tokenizer, cfg.seed)
        return DataBundle(tokenizer, sft.datamodule, sft.fingerprint, None)
    corpus = prepare_corpus(data_cfg)
    tokenizer = build_tokenizer(OmegaConf.to_object(cfg.tokenizer), corpus)
    shards = prepare_shards(corpus, tokenizer, data_cfg.cache_dir)
    datamodule = LMDataModule(
        shards,
        seq_len=cfg.data.seq_len,
        batch_size=cfg.data.batch_size,
        seed=cfg.seed,
        accumulate_grad_batches=cfg.trainer.accumulate_grad_batches,
        val_batches=cfg.data.val_batches,
        sampler=cfg.data.sampler,
    )
    return DataBundle(tokenizer, datamodule, shards.key, shards.bytes_per_token("heldout"), corpus, shards)


def build_model(
    cfg: DictConfig, techniques: list[Technique], load_start: Callable[[nn.Module], None] | None = None
) -> tuple[nn.Module, dict[str, float]]:
    """Same seed, same weights: initialization draws from a generator seeded by the run seed.

    Order: initialize, each technique's `transform_model`, `load_start(model)` (init_from's weights), then each
    technique's `transform_loaded_model` (what must see the starting weights, e.g. LoRA/PiSSA adapters)."""
    model = Llama(OmegaConf.to_object(cfg.model))
    init = OmegaConf.to_object(cfg.init)
    generator = torch.Generator().manual_seed(init.generator_seed(cfg.seed))
    init_stds = init_weights(model, init, generator=generator)
    for technique in techniques:
        model = technique.transform_model(model)
    if load_start is not None:
        load_start(model)
    for technique in techniques:
        model = technique.transform_loaded_model(model)
    return model, init_stds


def build_module(
    cfg: DictConfig, model: nn.Module, techniques: list[Technique], budget: Budget, bytes_per_token: float | None
) -> CausalLMModule:
    editors = [t.edit_param_groups for t in techniques]
    if cfg.trainer.activation_checkpointing:
        checkpoint_blocks(model)  # before compile, so the compiled graph recomputes each block
    if cfg.trainer.compile:
        # Parameters keep their module paths (under `_orig_mod.`), so families and checkpoints still line up.
        model = torch.compile(model)
    return CausalLMModule(
        model,
        optimizer_factory=partial(build_optimizer, optim_cfg=cfg.optim, group_editors=editors),
        schedule_factory=partial(build_schedule, schedule_cfg=cfg.schedule, steps=budget.steps, warmup=budget.warmup_steps),
        grad_norm_every=cfg.trainer.log_every_n_steps,
        bytes_per_token=bytes_per_token,
        loss_terms=[t.loss_terms for t in techniques if t.has_loss_terms()],
    )


def optimizer_step_flags(cfg: DictConfig) -> dict[str, Any]:
    """The Trainer arguments of Lightning's optimizer step: clipping by norm and gradient accumulation."""
    return {"gradient_clip_val": cfg.optim.grad_clip or None,
            "accumulate_grad_batches": cfg.trainer.accumulate_grad_batches}


def run_step_callbacks(cfg: DictConfig, budget: Budget) -> list[L.Callback]:
    """The callbacks every run does work in on every step (`make bench` times the same ones)."""
    t = cfg.trainer
    return [
        DivergenceGuard(t.divergence_factor, t.log_every_n_steps),
        TokenProgress(budget.tokens_per_step, t.log_every_n_steps),
        Throughput(budget.tokens_per_step, budget.flops_per_token, t.log_every_n_steps, t.precision),
    ]


def build_callbacks(
    cfg: DictConfig,
    budget: Budget,
    techniques: list[Technique],
    checkpoint_dir: Path,
    record: RunRecord,
) -> list[L.Callback]:
    t = cfg.trainer
    checkpoint = LastCheckpoint(checkpoint_dir, t.checkpoint_every_n_steps, t.stop_after_steps,
                                final_step=budget.steps, val_every_n_steps=t.val_every_n_steps)
    callbacks: list[L.Callback] = [record, *run_step_callbacks(cfg, budget)]
    for technique in techniques:
        callbacks += technique.callbacks()
    if cfg.diagnostics.names:
        callbacks.append(DiagnosticsLogger(list(cfg.diagnostics.names), cfg.diagnostics.every_n_steps, cfg.diagnostics.batch_size))
    callbacks.append(ValidationReplay(t.val_every_n_steps))  # after every callback that prepares the model
    callbacks.append(checkpoint)  # last, so it saves what every other callback has done this step
    return callbacks


def build_trainer(cfg: DictConfig, budget: Budget, callbacks: list[L.Callback], logger, root_dir: Path) -> L.Trainer:
    t = cfg.trainer
    return L.Trainer(
        accelerator=t.accelerator,
        devices=t.devices,
        num_nodes=t.num_nodes,
        strategy=lightning_strategy(t),
        precision=t.precision,
        max_steps=budget.steps,
        max_epochs=-1,
        val_check_interval=t.val_every_n_steps * t.accumulate_grad_batches,
        check_val_every_n_epoch=None,
        num_sanity_val_steps=0,
        log_every_n_steps=t.log_every_n_steps,
        **optimizer_step_flags(cfg),
        logger=logger,
        callbacks=callbacks,
        enable_checkpointing=False,
        plugins=[VerifiedCheckpointIO()],  # resume restores only a checkpoint that matches its checksum
        enable_model_summary=False,
        enable_progress_bar=False,
        profiler=NoProfiler(),
        default_root_dir=str(root_dir),
    )
