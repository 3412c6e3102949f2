"""A run's identity: the part of its resolved config that decides what it computes (its config hash).

    repro.config_hash(identity_of(OmegaConf.to_container(cfg, resolve=True)))   # tags.config_hash

Two runs with one identity compute the same thing: an ablation cell already finished is skipped, a killed
rerun of the config is found. Run-management fields are left out, and so are fields added after runs were
recorded while they hold their "not used" value, so every recorded cell keeps its hash.
"""

from __future__ import annotations

from lit_modules.config.data import DATA_ADDED_DEFAULTS
from lit_modules.config.schema import OPTIM_ADDED_DEFAULTS
from lit_modules.model.config import ADDED_DEFAULTS as MODEL_ADDED_DEFAULTS
from lit_modules.model.init_config import ADDED_DEFAULTS as INIT_ADDED_DEFAULTS

# Run-management fields: they change how a run is driven, not what it computes.
NOT_IDENTITY = ("dry_run", "resume", "logger", "runs_dir", "parent_run_id", "tags", "diagnostics", "eval", "plan")
# global_batch_tokens only derives accumulate_grad_batches (which is identity); activation checkpointing
# recomputes the same activations: neither changes what is computed.
NOT_IDENTITY_TRAINER = ("stop_after_steps", "num_threads", "checkpoint_every_n_steps", "global_batch_tokens",
                        "activation_checkpointing")
ADDED_FIELD_DEFAULTS = {"model": MODEL_ADDED_DEFAULTS, "init": INIT_ADDED_DEFAULTS, "optim": OPTIM_ADDED_DEFAULTS,
                        "data": DATA_ADDED_DEFAULTS}


def identity_of(resolved: dict) -> dict:
    identity = {k: v for k, v in resolved.items() if k not in NOT_IDENTITY}
    identity["trainer"] = {k: v for k, v in resolved["trainer"].items() if k not in NOT_IDENTITY_TRAINER}
    # Fields added later, at their "not used" value, are left out: a run recorded before they existed keeps
    # its hash (so a finished cell is still skipped), and any other value makes a new identity.
    for group, added in ADDED_FIELD_DEFAULTS.items():
        if isinstance(identity.get(group), dict):
            identity[group] = {k: v for k, v in identity[group].items() if not (k in added and v == added[k])}
    return identity
