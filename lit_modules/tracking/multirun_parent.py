"""The parent run of a Hydra multirun (`python -m lit_modules.train -m ...`): the runs of one command are
grouped under it in the MLflow UI, as an ablation's cells are under theirs.

A command that names its own parent (`parent_run_id=...`, as the ablation driver does) gets none, and
neither does a dry run. The parent ends FINISHED when every job it started finished, FAILED otherwise
(KILLED on Ctrl-C or SIGTERM), with the count in `end_reason`.
"""

from __future__ import annotations

import datetime as dt
import time
from contextlib import contextmanager
from typing import Iterator

from omegaconf import DictConfig

from lit_modules.runs import tags
from lit_modules.runs.search import children_filter
from lit_modules.tracking.run_lifecycle import open_run, set_tags
from lit_modules.tracking.run_names import unique_run_name
from lit_modules.tracking.store import get_or_create_experiment, open_client, resolve_tracking_uri, tracking_uri
from lit_modules.runs.store_check import check_store
from lit_modules.tracking.system_tags import NOTE, SOURCE_NAME, USER, entry_point, user


def needs_parent(jobs: list[DictConfig]) -> bool:
    return bool(jobs) and not jobs[0].dry_run and not jobs[0].parent_run_id


@contextmanager
def multirun_parent(jobs: list[DictConfig], overrides: list[str]) -> Iterator[str | None]:
    """Yields the parent run id the jobs should name (None: they get none), and ends it after them."""
    if not needs_parent(jobs):
        yield None
        return
    first = jobs[0]
    uri = resolve_tracking_uri(first.logger.tracking_uri, first.runs_dir)
    check_store(uri)
    client = open_client(tracking_uri(first.logger.tracking_uri, first.runs_dir))
    experiment_id = get_or_create_experiment(client, first.logger.experiment, first.runs_dir)
    started = dt.datetime.now().strftime("%Y-%m-%d %H:%M:%S")
    name = unique_run_name(client, experiment_id, f"multirun/{started}")
    command = " ".join(overrides)
    parent = open_run(
        client, experiment_id, name,
        {tags.MULTIRUN_ROLE: tags.PARENT_ROLE, SOURCE_NAME: entry_point(), USER: user(),
         NOTE: f"Hydra multirun of {len(jobs)} jobs: `{command}`."},
        {"overrides": command, "jobs": str(len(jobs))},
    )
    since_ms = int(time.time() * 1000)
    status, reason = "FAILED", "the multirun stopped before its jobs ended"
    try:
        yield parent
        children = client.search_runs([experiment_id], filter_string=children_filter(parent), max_results=10_000)
        done = len([r for r in children if r.info.start_time >= since_ms and r.info.status == "FINISHED"])
        status = "FINISHED" if done >= len(jobs) else "FAILED"
        reason = "completed" if status == "FINISHED" else f"{done} of {len(jobs)} jobs finished"
    except KeyboardInterrupt:
        status, reason = "KILLED", "interrupted"
        raise
    finally:
        set_tags(client, parent, {tags.END_REASON: reason})
        client.set_terminated(parent, status=status)
