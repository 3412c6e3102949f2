"""Open, reopen and end MLflow runs; the status always says how the run really ended.

FINISHED only when training reached its budget; KILLED when interrupted (Ctrl-C, SIGTERM, a planned
pause, or a deliberate stop such as pruning); FAILED on any exception, with the reason as the `end_reason` tag.
"""

from __future__ import annotations

import signal
from contextlib import contextmanager
from typing import Callable, Iterator

from mlflow.entities import Param, RunTag
from mlflow.tracking import MlflowClient

from lit_modules.tracking.uri_masking import mask_password

PARENT_TAG = "mlflow.parentRunId"
MAX_PARAM_CHARS = 6000


def flatten(tree: dict, prefix: str = "") -> dict[str, str]:
    flat: dict[str, str] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            flat.update(flatten(value, name + "."))
        else:
            flat[name] = str(value)[:MAX_PARAM_CHARS]
    return flat


def open_run(
    client: MlflowClient,
    experiment_id: str,
    run_name: str | None,
    tags: dict[str, str],
    params: dict[str, str],
    parent_run_id: str | None = None,
) -> str:
    # Params and tags are read by anyone who can browse the store: no URL keeps its password there.
    all_tags = {k: mask_password(str(v)) for k, v in tags.items()}
    if parent_run_id:
        all_tags[PARENT_TAG] = parent_run_id
    run = client.create_run(experiment_id, run_name=run_name, tags=all_tags)
    items = [Param(k, mask_password(str(v))) for k, v in params.items()]
    for start in range(0, len(items), 100):  # MLflow caps a batch at 100 params
        client.log_batch(run.info.run_id, params=items[start : start + 100], synchronous=True)
    return run.info.run_id


def reopen_run(client: MlflowClient, run_id: str) -> None:
    client.update_run(run_id, status="RUNNING")
    client.set_tag(run_id, "resumed", "true")


def set_tags(client: MlflowClient, run_id: str, tags: dict[str, str]) -> None:
    client.log_batch(run_id, tags=[RunTag(k, mask_password(str(v))) for k, v in tags.items()], synchronous=True)


class RunStopped(Exception):
    """Raised to stop a run on purpose (e.g. a pruned sweep trial): the run ends KILLED with the reason."""


class _Terminated(KeyboardInterrupt):
    """SIGTERM turned into an interrupt so the run ends KILLED instead of hanging in RUNNING."""


def _raise_terminated(signum, frame) -> None:
    raise _Terminated()


@contextmanager
def run_lifecycle(client: MlflowClient, run_id: str, paused: Callable[[], bool] = lambda: False) -> Iterator[None]:
    previous = signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGTERM, _raise_terminated)
    except ValueError:  # not the main thread (e.g. a sweep worker thread): leave signals alone
        previous = None
    try:
        yield
    except (KeyboardInterrupt, SystemExit) as err:
        reason = "terminated" if isinstance(err, _Terminated) else "interrupted"
        if isinstance(err, SystemExit) and err.code in (0, None):
            reason = "exited"
        set_tags(client, run_id, {"end_reason": reason})
        client.set_terminated(run_id, status="KILLED")
        raise
    except RunStopped as err:
        set_tags(client, run_id, {"end_reason": str(err) or type(err).__name__})
        client.set_terminated(run_id, status="KILLED")
        raise
    except BaseException as err:
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
        set_tags(client, run_id, {"end_reason": f"{type(err).__name__}: {reason}"[:500]})
        client.set_terminated(run_id, status="FAILED")
        raise
    else:
        if paused():
            set_tags(client, run_id, {"end_reason": "paused; finish it with resume=<run id>"})
            client.set_terminated(run_id, status="KILLED")
        else:
            set_tags(client, run_id, {"end_reason": "completed"})
            client.set_terminated(run_id, status="FINISHED")
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
