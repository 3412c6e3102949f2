"""Is the Hugging Face Hub usable? Answered in at most a few seconds, before lm-eval spends minutes retrying.

Standard lm-eval tasks (BoolQ, ARC, PIQA, ...) download their data from the Hub. Offline we refuse them with
one sentence that names the local tasks to run instead. Local tasks never touch the network: `local_only()`
switches the `datasets` / `huggingface_hub` offline flags on, also when those libraries are already imported.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from contextlib import contextmanager
from typing import Iterator, Optional
from urllib.parse import urlparse

from lit_modules.config.eval_tasks import LOCAL_ALIAS, local_tasks_for

OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")
_TRUE = {"1", "ON", "YES", "TRUE"}


def offline_variable() -> Optional[str]:
    """The first offline switch set in the environment, e.g. 'HF_HUB_OFFLINE=1'; None when none is set."""
    for name in OFFLINE_VARIABLES:
        value = os.environ.get(name, "")
        if value.upper() in _TRUE:
            return f"{name}={value}"
    return None


def hub_reachable(timeout_s: float = 3.0) -> bool:
    """A TCP connection to the Hub endpoint within `timeout_s` (DNS included, hence the thread)."""
    endpoint = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    host, port = (
        endpoint.hostname or "huggingface.co",
        endpoint.port or (443 if endpoint.scheme != "http" else 80),
    )
    outcome: list[bool] = []

    def connect() -> None:
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                outcome.append(True)
        except OSError:
            outcome.append(False)

    thread = threading.Thread(target=connect, daemon=True)
    thread.start()
    thread.join(timeout_s)
    return bool(outcome and outcome[0])


def hub_unreachable_sentence(
    standard_tasks: list[str], corpus_name: Optional[str] = None, timeout_s: float = 3.0, key: str = "eval.tasks"
) -> Optional[str]:
    """None when the Hub can serve `standard_tasks`; otherwise the one sentence to show the user (`key`: the
    word that sets the tasks where the user is, `tasks` for make eval)."""
    if not standard_tasks:
        return None
    switch = offline_variable()
    if switch is None and hub_reachable(timeout_s):
        return None
    why = f"{switch} is set" if switch else f"no connection within {timeout_s:g} s"
    if corpus_name:
        *first, last = local_tasks_for(corpus_name)
        local = f"{', '.join(first)} and {last}"
    else:
        local = "local_<kind>_<corpus>"
    return (
        f"The Hugging Face Hub is unreachable ({why}), so the standard tasks {', '.join(standard_tasks)} "
        f"cannot load their data; run the local tasks {local} instead ({key}=[{LOCAL_ALIAS}])."
    )


@contextmanager
def local_only() -> Iterator[None]:
    """Offline flags on for the duration (environment and already-imported libraries), then restored."""
    saved_env = {name: os.environ.get(name) for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")}
    patched: list[tuple[object, str, object]] = []
    for module_name, attributes in (
        ("huggingface_hub.constants", ("HF_HUB_OFFLINE",)),
        ("datasets.config", ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE")),
    ):
        module = sys.modules.get(module_name)
        for attribute in attributes if module is not None else ():
            if hasattr(module, attribute):
                patched.append((module, attribute, getattr(module, attribute)))
                setattr(module, attribute, True)
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["HF_DATASETS_OFFLINE"] = "1"
    try:
        yield
    finally:
        for module, attribute, value in patched:
            setattr(module, attribute, value)
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
