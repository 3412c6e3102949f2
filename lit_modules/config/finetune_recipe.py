"""The `finetune` group: one fixed fine-tuning recipe applied identically to every base model.

    recipe = load_recipe("python_docs", {"steps": "50"})     # conf/finetune/python_docs.yaml + overrides
    recipe_hash(recipe)                                       # its identity, tagged finetune.recipe_hash

Used by the fine-tune driver (lit_modules.finetune), the plasticity pipeline and the evidence driver.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, replace
from typing import Optional

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from lit_modules.config import files
from lit_modules.config.errors import ConfigError

DEFAULT_RECIPE = "python_docs"


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
        if not files.has_option("data", self.data):
            found.append(f"finetune.data={self.data} names no file conf/data/{self.data}.yaml.")
        if not files.has_option("schedule", self.schedule):
            found.append(f"finetune.schedule={self.schedule} names no conf/schedule/{self.schedule}.yaml.")
        if self.lr <= 0 or self.weight_decay < 0:
            found.append("finetune.lr must be positive and finetune.weight_decay >= 0.")
        if self.steps < 1 or self.batch_size < 1 or self.val_every_n_steps < 1:
            found.append("finetune.steps, .batch_size and .val_every_n_steps must be at least 1.")
        return found


def recipe_hash(recipe: FinetuneRecipe) -> str:
    """Identity of a recipe's settings: two runs of `recipe.name` with different overrides differ here."""
    return hashlib.sha256(json.dumps(asdict(recipe), sort_keys=True).encode()).hexdigest()[:12]


def recipe_family(recipe: FinetuneRecipe) -> str:
    """Identity of a recipe's settings but its rate: the fine-tunes of one recipe whose rate is tuned per arm."""
    return recipe_hash(replace(recipe, lr=0.0))


def load_recipe(name: str = DEFAULT_RECIPE, overrides: dict[str, str] | None = None) -> FinetuneRecipe:
    if not files.has_option("finetune", name):
        raise ConfigError(files.missing_option_sentence("finetune", name, "fine-tuning recipe"))
    try:
        merged = OmegaConf.merge(files.load_option("finetune", name, FinetuneRecipe), overrides or {})
    except OmegaConfBaseException as err:
        raise ConfigError(f"Bad fine-tuning recipe setting: {str(err).splitlines()[0]}") from None
    recipe = OmegaConf.to_object(merged)
    problems = recipe.problems()
    if problems:
        raise ConfigError(" ".join(problems))
    return recipe
