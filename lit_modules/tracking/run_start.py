"""Opening a new run in the store: its experiment, tags, params and start artifacts; a finished twin.

What a run records before its first step, in one place: the experiment it lives in (a child in its
parent's), the tags a reader filters by (seed, config hash, commit, data, packages, hardware, ablation,
init, optimizer, techniques, system), every resolved config value and the budget as params, and the
config, reproducibility record, git diff and initial weight stds as artifacts.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from mlflow.tracking import MlflowClient
from omegaconf import DictConfig, OmegaConf

from lit_modules.config.budget import Budget
from lit_modules.optim.build import optimizer_tags
from lit_modules.runs import tags as run_tags
from lit_modules.runs.search import children_filter
from lit_modules.tracking import repro
from lit_modules.tracking.init_stds import INIT_STD_TABLE, init_std_params, write_init_std_table
from lit_modules.tracking.run_lifecycle import flatten, open_run
from lit_modules.tracking.run_names import base_run_name, unique_run_name
from lit_modules.tracking.run_owner import end_dead_runs
from lit_modules.tracking.store import get_or_create_experiment
from lit_modules.tracking.system_tags import system_tags
from lit_modules.runs.uri_masking import mask_password


def open_new_run(client: MlflowClient, cfg: DictConfig, resolved: dict, budget: Budget, config_hash: str,
                 git: dict, data, techniques, init_stds: dict) -> str:
    """Create the run (RUNNING) with its tags and params; returns its id."""
    # A child lives in its parent's experiment (MLflow nests runs only within one, and a grid made before the
    # experiment was renamed keeps finding its cells); a run without a parent goes to the configured one.
    experiment_id = (client.get_run(cfg.parent_run_id).info.experiment_id if cfg.parent_run_id
                     else get_or_create_experiment(client, cfg.logger.experiment, cfg.runs_dir))
    # An earlier run of this config whose process was killed outright is still RUNNING: end it KILLED.
    end_dead_runs(client, [experiment_id], f"tags.{run_tags.CONFIG_HASH} = '{config_hash}'", "a rerun of its config")
    tags = {
        run_tags.SEED: str(cfg.seed),
        run_tags.CONFIG_HASH: config_hash,
        "git_commit": git["commit"],
        "git_dirty": str(git["dirty"]).lower(),
        "data_fingerprint": data.fingerprint,
        **{f"pkg.{k}": v for k, v in repro.package_versions().items()},
        **{f"hw.{k}": v for k, v in repro.hardware().items()},
        **({run_tags.ABLATION_NAME: cfg.ablation.name, run_tags.ABLATION_ARM: cfg.ablation.arm} if cfg.ablation.name else {}),
        **({run_tags.ABLATION_CLAIM: cfg.ablation.claim} if cfg.ablation.claim else {}),
        **dict(cfg.tags or {}),
        **OmegaConf.to_object(cfg.init).tags(cfg.model.tie_embeddings),
        **optimizer_tags(cfg.optim),
    }
    for technique in techniques:
        tags.update(technique.tags())
    tags.update(system_tags(cfg, budget, git["commit"]))
    params = flatten(resolved)
    params.update({f"budget.{k}": str(v) for k, v in budget.as_dict().items()})
    params.update(init_std_params(init_stds))
    name = unique_run_name(client, experiment_id, base_run_name(cfg, config_hash))
    return open_run(client, experiment_id, name, tags, params, cfg.parent_run_id)


def log_start_artifacts(client: MlflowClient, run_id: str, cfg: DictConfig, git: dict, init_stds: dict) -> None:
    """run/config.yaml (passwords masked), run/reproducibility.json, run/git_diff.patch, the init-std table."""
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        (tmp_path / "config.yaml").write_text(mask_password(OmegaConf.to_yaml(cfg, resolve=True)))
        repro.write_record(
            tmp_path / "reproducibility.json",
            {"git": {k: v for k, v in git.items() if k != "diff"}, "packages": repro.package_versions(),
             "hardware": repro.hardware()},
        )
        if git["dirty"]:
            (tmp_path / "git_diff.patch").write_text(git["diff"])
        write_init_std_table(tmp_path / INIT_STD_TABLE, init_stds)
        client.log_artifacts(run_id, tmp, artifact_path="run")


def finished_twin(client: MlflowClient, parent_run_id: str, config_hash: str):
    """A FINISHED run with the same config hash under the same parent (an ablation cell already done)."""
    parent = client.get_run(parent_run_id)
    twins = client.search_runs(
        [parent.info.experiment_id],
        filter_string=f"{children_filter(parent_run_id)} and tags.{run_tags.CONFIG_HASH} = '{config_hash}' "
        "and attributes.status = 'FINISHED'",
        max_results=1,
    )
    return twins[0] if twins else None
