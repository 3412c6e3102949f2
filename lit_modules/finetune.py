"""Fine-tune a finished pre-training run with one fixed recipe and measure its plasticity.

    python -m lit_modules.finetune base_run=<MLflow run id> [finetune=python_docs] [runs_dir=runs]
                                   [finetune.<recipe field>=value ...] [<run config key>=value ...]

"Plasticity" (Han et al., arXiv 2602.11137; papers.md section 5) is the gain a base model gets from the same
fine-tuning. Here, on the target corpus's held-out split:

    finetune/target_loss_before   the BASE weights' loss, measured in the fine-tune run before its first step
    finetune/target_loss_after    the fine-tuned loss, measured the same way after the last step
    finetune/plasticity           before - after (nats/token; larger = adapted more)
    finetune/base_pretrain_val_loss  the base run's final pre-training val/loss, for the decoupling question

The fine-tune is a NEW MLflow run: the base run's recorded config (`<checkpoint_dir>/config.json`) with the
recipe's settings (target data, lr, decay, steps, schedule, batch), `init_from=<base run id>` (weights only:
fresh optimizer and schedule) and tags `finetune.base_run_id`, `finetune.recipe`, `finetune.recipe_hash`.
The base run's tokenizer is kept (a BPE is loaded from the file the base run trained, never retrained on the
target). It is nested under its base run (`parent_run_id` = the base run), not under the base's grid parent:
`analysis` treats every child of an ablation parent as a grid cell. The base's grid parent is in tag
`finetune.grid_parent_run_id`.
Fine-tuning the same base with the same recipe again is skipped (same config hash under the same parent).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sys
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Iterable, Optional

import lightning as L
import torch
import torch.nn.functional as F
from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from lit_modules.config.composition import override_error_sentence
from lit_modules.config.errors import ConfigError
from lit_modules.config.schema import AblationConfig, Config, RegimeConfig, ScheduleConfig
from lit_modules.data import DataConfig, DataError, TokenizerConfig
from lit_modules.resume import CHECKPOINT_DIR_TAG, CONFIG_SIDECAR
from lit_modules.tracking.store import resolve_tracking_uri, tracking_uri
from lit_modules.tracking.store_check import check_store
from lit_modules.tracking.uri_masking import mask_password

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"
DEFAULT_RECIPE = "python_docs"
BASE_TAG = "finetune.base_run_id"
RECIPE_TAG = "finetune.recipe"
RECIPE_HASH_TAG = "finetune.recipe_hash"
BEFORE = "finetune/target_loss_before"
AFTER = "finetune/target_loss_after"
PLASTICITY = "finetune/plasticity"
BASE_VAL = "finetune/base_pretrain_val_loss"


@dataclass
class FinetuneRecipe:
    """The `finetune` group: one fixed recipe applied identically to every base model."""

    name: str = DEFAULT_RECIPE
    data: str = "python_docs"  # conf/data/<name>.yaml: the target corpus (must differ from pre-training)
    lr: float = 1e-3
    weight_decay: float = 0.0
    steps: int = 300
    schedule: str = "cosine"  # conf/schedule/<name>.yaml
    warmup_fraction: float = 0.05
    min_lr_ratio: float = 0.1
    batch_size: int = 8
    seq_len: Optional[int] = None  # None: the base run's data.seq_len
    val_batches: Optional[int] = None  # None: the target data config's
    val_every_n_steps: int = 100

    def problems(self) -> list[str]:
        found = []
        if not (CONF_DIR / "data" / f"{self.data}.yaml").is_file():
            found.append(f"finetune.data={self.data} names no file conf/data/{self.data}.yaml.")
        if not (CONF_DIR / "schedule" / f"{self.schedule}.yaml").is_file():
            found.append(f"finetune.schedule={self.schedule} names no conf/schedule/{self.schedule}.yaml.")
        if self.lr <= 0 or self.weight_decay < 0:
            found.append("finetune.lr must be positive and finetune.weight_decay >= 0.")
        if self.steps < 1 or self.batch_size < 1 or self.val_every_n_steps < 1:
            found.append("finetune.steps, .batch_size and .val_every_n_steps must be at least 1.")
        return found


def recipe_hash(recipe: FinetuneRecipe) -> str:
    """Identity of a recipe's settings: two runs of `recipe.name` with different overrides differ here."""
    return hashlib.sha256(json.dumps(asdict(recipe), sort_keys=True).encode()).hexdigest()[:12]


def load_recipe(name: str = DEFAULT_RECIPE, overrides: dict[str, str] | None = None) -> FinetuneRecipe:
    path = CONF_DIR / "finetune" / f"{name}.yaml"
    if not path.is_file():
        known = ", ".join(sorted(p.stem for p in path.parent.glob("*.yaml")))
        raise ConfigError(f"There is no fine-tuning recipe '{name}' in conf/finetune/ (known: {known}).")
    try:
        merged = OmegaConf.merge(OmegaConf.structured(FinetuneRecipe), OmegaConf.load(path), overrides or {})
    except OmegaConfBaseException as err:
        raise ConfigError(f"Bad fine-tuning recipe setting: {str(err).splitlines()[0]}") from None
    recipe = OmegaConf.to_object(merged)
    problems = recipe.problems()
    if problems:
        raise ConfigError(" ".join(problems))
    return recipe


# --- the base run -----------------------------------------------------------------------------------


@dataclass
class BaseRun:
    run_id: str
    config: dict  # resolved pre-training config as recorded in config.json
    checkpoint: Path
    val_loss: float  # final pre-training val/loss (NaN if never logged)
    run_name: str
    grid_parent: str | None
    tags: dict = field(default_factory=dict)


def open_store(runs_dir: str) -> MlflowClient:
    """The MLflow store the base run lives in; refuses to create an empty one under a mistyped runs_dir."""
    if not os.environ.get("MLFLOW_TRACKING_URI") and not (Path(runs_dir) / "mlflow.db").is_file():
        raise ConfigError(
            f"There is no MLflow store under {Path(runs_dir).resolve()}; "
            "pass runs_dir=<the folder the base run was trained in>."
        )
    check_store(resolve_tracking_uri(None, runs_dir))
    return MlflowClient(tracking_uri(None, runs_dir))


def load_base(client: MlflowClient, run_id: str) -> BaseRun:
    try:
        run = client.get_run(run_id)
    except Exception:  # noqa: BLE001 - any lookup failure means the same thing to the user
        raise ConfigError(
            f"base_run={run_id} is not a run in the MLflow store {mask_password(client.tracking_uri)}; "
            "pass the id of a finished pre-training run."
        ) from None
    if run.info.status != "FINISHED":
        raise ConfigError(
            f"base_run={run_id} is {run.info.status}, not FINISHED; "
            "fine-tune only a finished pre-training run."
        )
    directory = Path(run.data.tags.get(CHECKPOINT_DIR_TAG) or "")
    checkpoint, sidecar = directory / "last.ckpt", directory / CONFIG_SIDECAR
    if not run.data.tags.get(CHECKPOINT_DIR_TAG) or not checkpoint.is_file() or not sidecar.is_file():
        raise ConfigError(
            f"base_run={run_id} has no last.ckpt and {CONFIG_SIDECAR} in its checkpoint folder ({directory})."
        )
    return BaseRun(
        run_id=run_id,
        config=json.loads(sidecar.read_text())["config"],
        checkpoint=checkpoint,
        val_loss=float(run.data.metrics.get("val/loss", float("nan"))),
        run_name=run.info.run_name or run_id[:8],
        grid_parent=run.data.tags.get("mlflow.parentRunId"),
        tags=dict(run.data.tags),
    )


# --- the fine-tune run's config ---------------------------------------------------------------------


def _structured(recorded: dict) -> DictConfig:
    """The recorded config on the current schema (keys a newer or older schema lacks are dropped)."""
    known = {f.name for f in fields(Config)}
    return OmegaConf.merge(OmegaConf.structured(Config), {k: v for k, v in recorded.items() if k in known})


def _same_corpus(a: DictConfig, b: DictConfig) -> bool:
    keys = ("source", "name", "hf_path", "hf_name", "text_field")
    return all(a[k] == b[k] for k in keys) and list(a.data_files) == list(b.data_files)


def base_tokenizer(base_cfg: DictConfig) -> dict:
    """The base run's tokenizer, pinned: a BPE trained on the base corpus is loaded from its file."""
    tok = base_cfg.tokenizer
    if tok.kind != "bpe":
        return OmegaConf.to_container(tok)
    from lit_modules.data import prepare_corpus
    from lit_modules.data.tokenization import bpe_cache_path

    corpus = prepare_corpus(OmegaConf.to_object(base_cfg.data))
    path = bpe_cache_path(corpus.cache_dir, corpus.fingerprint, tok.vocab_size)
    if not path.is_file():
        raise ConfigError(
            f"The base run's BPE tokenizer file {path} is missing; "
            "it is needed to read the target text the same way."
        )
    return {"kind": "pretrained", "vocab_size": tok.vocab_size, "path": str(path.resolve())}


def _group_option(group: str, option: str, schema) -> DictConfig:
    """conf/<group>/<option>.yaml on its schema."""
    return OmegaConf.merge(OmegaConf.structured(schema), OmegaConf.load(CONF_DIR / group / f"{option}.yaml"))


def finetune_config(
    base: BaseRun, recipe: FinetuneRecipe, runs_dir: str, overrides: Iterable[str] = ()
) -> DictConfig:
    """Base config + recipe: target data, optimizer LR/decay, fixed steps, schedule; init from the base."""
    try:
        cfg = _structured(base.config)
        target = _group_option("data", recipe.data, DataConfig)
    except OmegaConfBaseException as err:
        first_line = str(err).splitlines()[0]
        raise ConfigError(f"The base run's recorded config does not fit the schema: {first_line}") from None
    if _same_corpus(target, cfg.data):
        raise ConfigError(
            f"The recipe's target data ({recipe.data}) is the base run's pre-training corpus; "
            "plasticity needs a different distribution."
        )
    target.cache_dir = cfg.data.cache_dir
    target.seq_len = recipe.seq_len or cfg.data.seq_len
    target.batch_size = recipe.batch_size
    if recipe.val_batches is not None:
        target.val_batches = recipe.val_batches
    schedule = _group_option("schedule", recipe.schedule, ScheduleConfig)
    schedule.warmup_fraction, schedule.warmup_steps = recipe.warmup_fraction, None
    schedule.min_lr_ratio = recipe.min_lr_ratio

    cfg.tokenizer = OmegaConf.merge(OmegaConf.structured(TokenizerConfig), base_tokenizer(cfg))
    cfg.data = target
    if target.source == "sft":
        # Evaluation tasks read a text corpus; the SFT target's own held-out responses are the measure.
        cfg.eval.tasks, cfg.eval.probe = [], False
    cfg.schedule = schedule
    cfg.optim.lr, cfg.optim.weight_decay = recipe.lr, recipe.weight_decay
    cfg.regime = RegimeConfig(name="steps", param_count=cfg.regime.param_count)
    cfg.trainer.max_steps, cfg.trainer.stop_after_steps = recipe.steps, None
    cfg.trainer.val_every_n_steps = recipe.val_every_n_steps
    cfg.ablation = AblationConfig()  # not a grid cell: linked to its base by tags, not by arm
    cfg.init_from, cfg.resume, cfg.dry_run = base.run_id, None, False
    cfg.parent_run_id, cfg.runs_dir = base.run_id, runs_dir
    cfg.logger.run_name = f"finetune:{recipe.name}:{base.run_name}"
    tags = dict(cfg.tags or {})
    tags.update({
        BASE_TAG: base.run_id,
        RECIPE_TAG: recipe.name,
        RECIPE_HASH_TAG: recipe_hash(recipe),
        "finetune.target_data": recipe.data,
        "fidelity.finetune.recipe": "assumed",  # the paper's SFT recipe is out of reach on a CPU
    })
    for key in ("ablation.name", "ablation.arm"):
        if base.tags.get(key):
            tags[f"finetune.base_{key.split('.')[1]}"] = base.tags[key]
    if base.grid_parent:
        tags["finetune.grid_parent_run_id"] = base.grid_parent
    cfg.tags = tags
    overrides = list(overrides)
    if overrides:
        try:
            cfg = OmegaConf.merge(cfg, OmegaConf.from_dotlist(overrides))
        except OmegaConfBaseException as err:
            raise ConfigError(override_error_sentence(err)) from None
    return cfg


def check_run_overrides(overrides: Iterable[str]) -> None:
    """Refuse, before the store is opened, what no base run's config could take.

    A fine-tune's config is its base run's recorded one, so a group (pc=, model=, ...) cannot be swapped
    in; keys and types are checked against the schema here (a technique's own keys, which only the base
    run's config has, when the fine-tune config is made).
    """
    overrides = list(overrides)
    for word in overrides:
        key = word.split("=", 1)[0]
        if "." not in key and (CONF_DIR / key).is_dir():
            raise ConfigError(
                f"{word} selects a config group, but a fine-tune keeps its base run's config; "
                "change single keys (e.g. optim.weight_decay=0.1) or the recipe (finetune.<field>=...)."
            )
    try:
        OmegaConf.merge(OmegaConf.structured(Config), OmegaConf.from_dotlist(overrides))
    except OmegaConfBaseException as err:
        raise ConfigError(override_error_sentence(err)) from None


# --- before/after measurement -----------------------------------------------------------------------


@torch.no_grad()
def heldout_loss(model: torch.nn.Module, dataloader, device: torch.device, context=None) -> float:
    """Mean next-token cross-entropy (nats/token) over every target of the loader (-100 targets ignored)."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    try:
        for x, y in dataloader:
            with context() if context is not None else contextlib.nullcontext():
                logits = model(x.to(device))
            y = y.to(device)
            flat = logits.float().reshape(-1, logits.size(-1))
            total += F.cross_entropy(flat, y.reshape(-1), reduction="sum").item()
            count += int((y != -100).sum())
    finally:
        model.train(was_training)
    return total / max(count, 1)


class PlasticityProbe(L.Callback):
    """Target loss of the base weights before the first step; plasticity at the end of a complete run."""

    def __init__(self, base_val_loss: float, steps: int):
        self.base_val_loss, self.steps = base_val_loss, steps
        self.before: float | None = None
        self.after: float | None = None

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.global_step != 0:
            return  # a resumed fine-tune: "before" was measured at its first start
        context = getattr(trainer.precision_plugin, "forward_context", None)
        loader = trainer.datamodule.val_dataloader()
        self.before = heldout_loss(pl_module.model, loader, pl_module.device, context)
        self._log(trainer, {BEFORE: self.before, BASE_VAL: self.base_val_loss}, step=0)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.before is None or trainer.global_step < self.steps:
            return  # paused: measured when the fine-tune completes
        # Measured exactly as "before" (token-weighted): with prompt-masked SFT batches, Lightning's
        # val/loss weights batches equally however many response tokens each holds.
        context = getattr(trainer.precision_plugin, "forward_context", None)
        self.after = heldout_loss(pl_module.model, trainer.datamodule.val_dataloader(), pl_module.device, context)
        metrics = {AFTER: self.after, PLASTICITY: self.before - self.after}
        self._log(trainer, metrics, step=trainer.global_step)

    @staticmethod
    def _log(trainer: L.Trainer, metrics: dict[str, float], step: int) -> None:
        finite = {k: v for k, v in metrics.items() if v == v}
        if trainer.logger is not None and finite:
            trainer.logger.log_metrics(finite, step=step)


# --- one fine-tune ----------------------------------------------------------------------------------


@dataclass
class FinetuneResult:
    run_id: str | None
    status: str
    base_run_id: str
    before: float = float("nan")
    after: float = float("nan")
    plasticity: float = float("nan")
    base_val_loss: float = float("nan")

    def line(self) -> str:
        return (f"fine-tune {self.run_id} of base {self.base_run_id} {self.status.lower()}: target loss "
                f"{self.before:.4f} -> {self.after:.4f} (plasticity {self.plasticity:+.4f}); "
                f"base pre-training val/loss {self.base_val_loss:.4f}")


def finetune(
    base_run_id: str,
    recipe: str | FinetuneRecipe = DEFAULT_RECIPE,
    runs_dir: str = "runs",
    overrides: Iterable[str] = (),
    extra_callbacks: Iterable[L.Callback] = (),
    client: MlflowClient | None = None,
) -> FinetuneResult:
    """Fine-tune one base run; raises ConfigError/DataError (one sentence) before anything runs."""
    from lit_modules.train import run

    recipe = load_recipe(recipe) if isinstance(recipe, str) else recipe
    client = client or open_store(runs_dir)
    base = load_base(client, base_run_id)
    cfg = finetune_config(base, recipe, runs_dir, overrides)
    probe = PlasticityProbe(base.val_loss, recipe.steps)
    result = run(cfg, extra_callbacks=[probe, *extra_callbacks])
    metrics = result.metrics
    if result.run_id is not None:
        metrics = {**{k: float(v) for k, v in client.get_run(result.run_id).data.metrics.items()}, **metrics}
    return FinetuneResult(
        run_id=result.run_id,
        status=result.status,
        base_run_id=base_run_id,
        before=metrics.get(BEFORE, float("nan")),
        after=metrics.get(AFTER, float("nan")),
        plasticity=metrics.get(PLASTICITY, float("nan")),
        base_val_loss=base.val_loss,
    )


def parse_args(argv: list[str]) -> tuple[str, str, str, dict[str, str], list[str]]:
    """(base run id, recipe name, runs_dir, recipe overrides, run-config overrides) from key=value words."""
    base, recipe, runs_dir = "", DEFAULT_RECIPE, "runs"
    recipe_overrides, overrides = {}, []
    recipe_fields = {f.name for f in fields(FinetuneRecipe)}
    for word in argv:
        key, sep, value = word.partition("=")
        if not sep or key.startswith(("+", "~")):
            raise ConfigError(f"Arguments are key=value words; {word!r} is not one.")
        if key == "base_run":
            base = value
        elif key == "finetune":
            recipe = value
        elif key == "runs_dir":
            runs_dir = value
        elif key.startswith("finetune."):
            name = key.split(".", 1)[1]
            if name not in recipe_fields:
                known = ", ".join(sorted(recipe_fields))
                raise ConfigError(f"Unknown recipe field '{name}'; the fields are {known}.")
            recipe_overrides[name] = value
        else:
            overrides.append(word)
    if not base:
        raise ConfigError("Say which pre-training run to fine-tune: base_run=<MLflow run id>.")
    return base, recipe, runs_dir, recipe_overrides, overrides


def main(argv: list[str] | None = None) -> int:
    from lit_modules.config.schema import register_schema

    register_schema()
    try:
        argv = sys.argv[1:] if argv is None else argv
        base, recipe_name, runs_dir, recipe_overrides, overrides = parse_args(argv)
        recipe = load_recipe(recipe_name, recipe_overrides)
        check_run_overrides(overrides)
        result = finetune(base, recipe, runs_dir, overrides)
    except (ConfigError, DataError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(result.line())
    return 0 if result.status in ("FINISHED", "SKIPPED") else 1


if __name__ == "__main__":
    sys.exit(main())
