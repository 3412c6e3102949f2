"""MLflow's own fields for a run: source commit and entry point, user, and a description of what it is.

The UI shows them where a user looks first (the run list's Source and User columns, the run page's
description), next to the platform's own tags (git_commit, seed, ablation.*), which stay as they are.
"""

from __future__ import annotations

import getpass
import sys
from pathlib import Path

from omegaconf import DictConfig

from lit_modules.config import files
from lit_modules.config.budget import Budget
from lit_modules.runs import tags as run_tags
from lit_modules.technique_reports import technique_reports

REPO = files.CONF_DIR.parent

GIT_COMMIT = "mlflow.source.git.commit"
SOURCE_NAME = "mlflow.source.name"
SOURCE_TYPE = "mlflow.source.type"
USER = "mlflow.user"
NOTE = "mlflow.note.content"


def entry_point() -> str:
    """The script that started this process, relative to the repository where it lies inside it."""
    script = Path(sys.argv[0] or "python").resolve()
    try:
        return str(script.relative_to(REPO))
    except ValueError:
        return script.name


def user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no passwd entry (some containers): MLflow's UI shows no user
        return "unknown"


def paper_of(claim_key: str) -> str | None:
    """The paper a claim key's report.yaml names (`claim.paper`), if the key is a technique's claim."""
    reports = {report.name: report for report in technique_reports()}
    for key in dict.fromkeys((claim_key, claim_key.rsplit("/", 1)[-1])):
        if key in reports:
            return (reports[key].claim or {}).get("paper")
    return None


def describe_run(cfg: DictConfig, budget: Budget) -> str:
    """One Markdown paragraph: what the run is (paper, arm, seed) and at which scale."""
    scale = (f"model `{cfg.model.name}` ({budget.params_non_embedding:,} non-embedding parameters), "
             f"{budget.total_tokens:,} tokens in {budget.steps:,} steps")
    techniques = ", ".join(k for k, v in (cfg.techniques or {}).items() if v is not None) or "none"
    if cfg.ablation.name and cfg.ablation.arm:
        key = cfg.ablation.claim or cfg.ablation.name
        paper = paper_of(key)
        head = (f"Cell of the ablation **{cfg.ablation.name}**" + (f" ({paper})" if paper else "")
                + f": arm `{cfg.ablation.arm}` (reference `{cfg.ablation.baseline}`), seed {cfg.seed}.")
    elif (cfg.tags or {}).get(run_tags.SWEEP_STUDY):
        head = (f"Trial {cfg.tags.get(run_tags.SWEEP_TRIAL, '?')} of the sweep **{cfg.tags[run_tags.SWEEP_STUDY]}**, "
                f"seed {cfg.seed}.")
    elif (cfg.tags or {}).get(run_tags.FINETUNE_BASE):
        head = f"Fine-tune (recipe `{cfg.tags.get(run_tags.FINETUNE_RECIPE, '?')}`) of run {cfg.tags[run_tags.FINETUNE_BASE]}."
    else:
        head = f"Run of `{cfg.ablation.name or cfg.model.name}`, seed {cfg.seed}."
    return f"{head} Scale: {scale}. Techniques: {techniques}."


def system_tags(cfg: DictConfig, budget: Budget, git_commit: str) -> dict[str, str]:
    return {
        GIT_COMMIT: git_commit,
        SOURCE_NAME: entry_point(),
        SOURCE_TYPE: "LOCAL",
        USER: user(),
        NOTE: describe_run(cfg, budget),
    }
