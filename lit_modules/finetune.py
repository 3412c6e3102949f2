"""Fine-tune a finished pre-training run with one fixed recipe and measure its plasticity.

    python -m lit_modules.finetune base_run=<MLflow run id | hf:<folder>> [finetune=python_docs] [runs_dir=runs]
                                   [finetune.<recipe field>=value ...] [<run config key>=value ...]
                                   [<technique>=<option> ...]     # e.g. lora=pissa wisca=lora_tensor

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

This module is the driver: the recipe is `lit_modules.config.finetune_recipe`, the before/after probe is
`lit_modules.callbacks.plasticity_probe`, and the base run is read through `lit_modules.runs.finished`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Iterable

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from lit_modules.config import files
from lit_modules.config.arguments import DOTLIST, Arg, Prefix, Verb, parse_words
from lit_modules.config.composition import override_error_sentence
from lit_modules.config.errors import ConfigError
from lit_modules.config.finetune_recipe import DEFAULT_RECIPE, FinetuneRecipe, load_recipe, recipe_family, recipe_hash
from lit_modules.config.schema import AblationConfig, Config, RegimeConfig, ScheduleConfig
from lit_modules.data import DataConfig, DataError, TokenizerConfig
from lit_modules.hf import is_hf_reference
from lit_modules.runs import tags
from lit_modules.runs.finished import FinishedRun, config_on_schema, finished_run
from lit_modules.runs.store import open_store

if TYPE_CHECKING:  # Lightning and MLflow load once the words and the base run passed their checks
    import lightning as L
    from mlflow.tracking import MlflowClient

BASE_KEY = "base_run"  # the command-line word naming the base run


# --- the fine-tune run's config ---------------------------------------------------------------------


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


def finetune_config(
    base: FinishedRun, recipe: FinetuneRecipe, runs_dir: str, overrides: Iterable[str] = ()
) -> DictConfig:
    """Base config + recipe: target data, optimizer LR/decay, fixed steps, schedule; init from the base."""
    try:
        cfg = config_on_schema(base.config)
        target = files.load_option("data", recipe.data, DataConfig)
    except OmegaConfBaseException as err:
        first_line = str(err).splitlines()[0]
        raise ConfigError(f"The base run's recorded config does not fit the schema: {first_line}") from None
    if not is_hf_reference(base.run_id) and _same_corpus(target, cfg.data):  # a folder's corpus is unknown
        raise ConfigError(
            f"The recipe's target data ({recipe.data}) is the base run's pre-training corpus; "
            "plasticity needs a different distribution."
        )
    target.cache_dir = cfg.data.cache_dir
    target.seq_len = recipe.seq_len or cfg.data.seq_len
    target.batch_size = recipe.batch_size
    if recipe.val_batches is not None:
        target.val_batches = recipe.val_batches
    schedule = files.load_option("schedule", recipe.schedule, ScheduleConfig)
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
    # A Hugging Face folder is no MLflow run to nest under (tag finetune.base_run_id still names it).
    cfg.parent_run_id, cfg.runs_dir = (None if is_hf_reference(base.run_id) else base.run_id), runs_dir
    cfg.logger.run_name = f"finetune/{base.name}"  # the recipe is the finetune.recipe tag
    linked = dict(cfg.tags or {})
    linked.update({
        tags.FINETUNE_BASE: base.run_id,
        tags.FINETUNE_RECIPE: recipe.name,
        tags.FINETUNE_RECIPE_HASH: recipe_hash(recipe),
        tags.FINETUNE_RECIPE_FAMILY: recipe_family(recipe),
        tags.FINETUNE_TARGET_DATA: recipe.data,
        "fidelity.finetune.recipe": "assumed",  # the paper's SFT recipe is out of reach on a CPU
    })
    for key in (tags.ABLATION_NAME, tags.ABLATION_ARM):
        if base.tags.get(key):
            linked[f"finetune.base_{key.split('.')[1]}"] = base.tags[key]
    if base.parent_id:
        linked[tags.FINETUNE_GRID_PARENT] = base.parent_id
    cfg.tags = linked
    added, overrides = split_technique_options(overrides)
    for name, node in technique_nodes(added).items():
        cfg.techniques[name] = node
    if overrides:
        try:
            cfg = OmegaConf.merge(cfg, OmegaConf.from_dotlist(overrides))
        except OmegaConfBaseException as err:
            raise ConfigError(override_error_sentence(err)) from None
    return cfg


def split_technique_options(words: Iterable[str]) -> tuple[list[str], list[str]]:
    """(technique options like `lora=pissa`, the other words): a fine-tune may add a technique to its base's."""
    words = list(words)
    top_level = {f.name for f in fields(Config)}
    # A technique's group is packaged under techniques.<name>, never a top-level key (read on disk, no import).
    from lit_modules.config.technique_groups import technique_groups

    groups = set(technique_groups(files.CONF_DIR)) - top_level
    techniques, rest = [], []
    for word in words:
        key = word.split("=", 1)[0]
        (techniques if key in groups and "=" in word else rest).append(word)
    return techniques, rest


def technique_nodes(options: list[str]) -> dict[str, DictConfig]:
    """`techniques.<name>` as `<name>=<option>` composes it (interpolations such as ${seed} kept, so they
    resolve against the fine-tune's own config)."""
    if not options:
        return {}
    from lit_modules.config.composition import compose_run_config

    composed = compose_run_config(options)
    names = [word.split("=", 1)[0] for word in options]
    return {name: OmegaConf.create(OmegaConf.to_container(composed.techniques[name], resolve=False)) for name in names}


def check_run_overrides(overrides: Iterable[str]) -> None:
    """Refuse, before the store is opened, what no base run's config could take.

    A fine-tune's config is its base run's recorded one, so a group (pc=, model=, ...) cannot be swapped
    in; keys and types are checked against the schema here (a technique's own keys, which only the base
    run's config has, when the fine-tune config is made).
    """
    added, overrides = split_technique_options(overrides)
    for word in added:
        name, option = word.split("=", 1)
        if not files.has_option(name, option):
            raise ConfigError(files.missing_option_sentence(name, option))
    for word in overrides:
        key = word.split("=", 1)[0]
        if "." not in key and files.is_group(key):
            raise ConfigError(
                f"{word} selects a config group, but a fine-tune keeps its base run's config; "
                "change single keys (e.g. optim.weight_decay=0.1), add a technique (e.g. lora=pissa) "
                "or change the recipe (finetune.<field>=...)."
            )
    try:
        OmegaConf.merge(OmegaConf.structured(Config), OmegaConf.from_dotlist(overrides))
    except OmegaConfBaseException as err:
        raise ConfigError(override_error_sentence(err)) from None


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
    if is_hf_reference(base_run_id):  # a Hugging Face folder: no store to read it from (the run makes one)
        from lit_modules.runs.hf_base import hf_base_run

        base = hf_base_run(base_run_id)
    else:
        client = client or open_store(runs_dir)
        base = finished_run(client, base_run_id, key=BASE_KEY, require_finished=True)
    cfg = finetune_config(base, recipe, runs_dir, overrides)
    from lit_modules.config.validate import validate

    validate(cfg)  # as lit_modules.train does: the fine-tune's config is refused before the training stack loads
    from lit_modules.callbacks.plasticity_probe import PlasticityProbe  # Lightning: only for a run that will start

    if client is not None:
        # The store the base was found in, as this process reaches it: the base's recorded URL has its
        # password masked (user:***@), so it cannot be used to connect.
        cfg.logger.tracking_uri = client.tracking_uri
    probe = PlasticityProbe(base.metric("val/loss"), recipe.steps)
    result = run(cfg, extra_callbacks=[probe, *extra_callbacks])
    metrics = result.metrics
    if result.run_id is not None:
        client = client or open_store(runs_dir, cfg.logger.tracking_uri)
        metrics = {**{k: float(v) for k, v in client.get_run(result.run_id).data.metrics.items()}, **metrics}
    return FinetuneResult(
        run_id=result.run_id,
        status=result.status,
        base_run_id=base_run_id,
        before=metrics.get(tags.TARGET_LOSS_BEFORE, float("nan")),
        after=metrics.get(tags.TARGET_LOSS_AFTER, float("nan")),
        plasticity=metrics.get(tags.PLASTICITY, float("nan")),
        base_val_loss=base.metric("val/loss"),
    )


VERB = Verb(
    "finetune",
    {
        BASE_KEY: Arg(required="Say which pre-training run to fine-tune: base_run=<MLflow run id> or hf:<folder>."),
        "finetune": Arg(default=DEFAULT_RECIPE),
        "runs_dir": Arg(default="runs"),
    },
    prefixes={"finetune.": Prefix(tuple(f.name for f in fields(FinetuneRecipe)), "recipe field")},
    rest=DOTLIST,  # run-config keys of the base run's recorded config
)


def parse_args(argv: list[str]) -> tuple[str, str, str, dict[str, str], list[str]]:
    """(base run id, recipe name, runs_dir, recipe overrides, run-config overrides) from key=value words."""
    words = parse_words(argv, VERB)
    return words[BASE_KEY], words["finetune"], words["runs_dir"], words.prefixed["finetune."], words.rest


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
