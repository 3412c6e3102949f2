"""Open, reopen and end MLflow runs; the status always says how the run really ended.

FINISHED only when training reached its budget; KILLED when interrupted (Ctrl-C, SIGTERM, SIGHUP, a
planned pause, or a deliberate stop such as pruning), with the signal named in `end_reason` ("terminated
by SIGTERM"); FAILED on any exception, with the reason as the `end_reason` tag. A process killed by
SIGKILL cannot say anything: its run is ended KILLED by the next process that touches it (`run_owner`).
"""

from __future__ import annotations

import signal
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from mlflow.entities import Param, RunTag
from mlflow.tracking import MlflowClient

from lit_modules.runs.tags import END_REASON, PARENT, RESUMED
from lit_modules.tracking.run_owner import own_run
from lit_modules.tracking.stop_deadline import arm_stop_deadline
from lit_modules.tracking.store import store_lock
from lit_modules.runs.uri_masking import mask_password

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
        all_tags[PARENT] = parent_run_id
    run = client.create_run(experiment_id, run_name=run_name, tags=all_tags)
    items = [Param(k, mask_password(str(v))) for k, v in params.items()]
    for start in range(0, len(items), 100):  # MLflow caps a batch at 100 params
        client.log_batch(run.info.run_id, params=items[start : start + 100], synchronous=True)
    return run.info.run_id


def reopen_run(client: MlflowClient, run_id: str) -> None:
    client.update_run(run_id, status="RUNNING")
    client.set_tag(run_id, RESUMED, "true")


def find_or_open_parent(
    client: MlflowClient,
    experiment_id: str,
    filter_string: str,
    run_name: str,
    tags: dict[str, str],
    params: dict[str, str],
) -> tuple[str, bool]:
    """A sweep's or grid's parent run, found again by `filter_string` and reopened, or opened; True if found.

    The search and the creation hold the store's lock: two drivers started together get one parent.
    """
    with store_lock(client.tracking_uri):
        found = client.search_runs([experiment_id], filter_string=filter_string, max_results=1)
        if found:
            reopen_run(client, found[0].info.run_id)
            return found[0].info.run_id, True
        return open_run(client, experiment_id, run_name, tags, params), False


def set_tags(client: MlflowClient, run_id: str, tags: dict[str, str]) -> None:
    with stop_signals_deferred():
        client.log_batch(run_id, tags=[RunTag(k, mask_password(str(v))) for k, v in tags.items()], synchronous=True)


class RunStopped(Exception):
    """Raised to stop a run on purpose (e.g. a pruned sweep trial): the run ends KILLED with the reason."""


class _Signalled(KeyboardInterrupt):
    """A stopping signal turned into an interrupt, so the run ends KILLED instead of hanging in RUNNING."""


# The signals that stop a run, what `end_reason` calls each, and the handler each replaces (only that one:
# a SIGINT or SIGHUP that the parent chose to ignore, e.g. under nohup, stays ignored).
_STOPPING = {
    signal.SIGTERM: ("terminated", (signal.SIG_DFL,)),
    signal.SIGINT: ("interrupted", (signal.default_int_handler,)),
    signal.SIGHUP: ("hung up", (signal.SIG_DFL,)),
}


_deferring = 0  # how deep inside `stop_signals_deferred` the main thread is
_deferred: list[int] = []


def _stop_reason(signum: int) -> str:
    return f"{_STOPPING[signum][0]} by {signal.Signals(signum).name}"


@contextmanager
def stop_signals_deferred() -> Iterator[None]:
    """A stopping signal that arrives inside the block interrupts at its end, not in the middle.

    An interrupt raised inside an MLflow write can leave its SQLite transaction open, and then the run's
    final status cannot be written ("database is locked") and the run stays RUNNING.
    """
    global _deferring
    _deferring += 1
    try:
        yield
    finally:
        _deferring -= 1
        if not _deferring and _deferred:
            signum = _deferred[0]
            _deferred.clear()
            raise _Signalled(_stop_reason(signum))


@contextmanager
def _signals_recorded(received: list[int]) -> Iterator[None]:
    """Stopping signals raise an interrupt and are recorded: Lightning turns the interrupt into exit(1)."""

    def stop(signum, frame) -> None:
        received.append(signum)
        arm_stop_deadline(signum)  # the stop below must end the process, or the deadline will
        if _deferring:
            _deferred.append(signum)
            return
        raise _Signalled(_stop_reason(signum))

    previous = {}
    for signum, (_, replaceable) in _STOPPING.items():
        try:
            if signal.getsignal(signum) in replaceable:
                previous[signum] = signal.signal(signum, stop)
        except ValueError:  # not the main thread (e.g. a sweep worker thread): leave signals alone
            break
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        _deferred.clear()


@contextmanager
def run_lifecycle(
    client: MlflowClient,
    run_id: str,
    paused: Callable[[], bool] = lambda: False,
    owner_dir: Path | None = None,
    reopen: bool = False,
) -> Iterator[None]:
    """The run is RUNNING inside the block and ends with its true status and reason.

    With `owner_dir`, this process holds the run's owner lock there for the block (`run_owner`), taken
    before a `reopen` changes the status, so a run another process trains now is refused unchanged.
    """
    if owner_dir is None:
        with _owned_lifecycle(client, run_id, paused, reopen):
            yield
        return
    with own_run(owner_dir, run_id), _owned_lifecycle(client, run_id, paused, reopen):
        yield


@contextmanager
def _owned_lifecycle(
    client: MlflowClient, run_id: str, paused: Callable[[], bool], reopen: bool
) -> Iterator[None]:
    if reopen:
        reopen_run(client, run_id)
    received: list[int] = []
    try:
        with _signals_recorded(received):
            yield
    except (KeyboardInterrupt, SystemExit) as err:
        reason = _stop_reason(received[0]) if received else "interrupted"
        if not received and isinstance(err, SystemExit) and err.code in (0, None):
            reason = "exited"
        set_tags(client, run_id, {END_REASON: reason})
        client.set_terminated(run_id, status="KILLED")
        raise
    except RunStopped as err:
        set_tags(client, run_id, {END_REASON: str(err) or type(err).__name__})
        client.set_terminated(run_id, status="KILLED")
        raise
    except BaseException as err:
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
        set_tags(client, run_id, {END_REASON: f"{type(err).__name__}: {reason}"[:500]})
        client.set_terminated(run_id, status="FAILED")
        raise
    else:
        if paused():
            set_tags(client, run_id, {END_REASON: "paused; finish it with resume=<run id>"})
            client.set_terminated(run_id, status="KILLED")
        else:
            set_tags(client, run_id, {END_REASON: "completed"})
            client.set_terminated(run_id, status="FINISHED")
