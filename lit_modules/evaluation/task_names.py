"""Names of the local (offline) tasks and how a task list splits into local and standard (hub) tasks.

A local task is `local_<kind>_<corpus>`; `local` alone means all kinds for the run's own corpus.
"""

from __future__ import annotations

from typing import Optional

LOCAL_ALIAS = "local"
LOCAL_PREFIX = "local_"
LOCAL_KINDS = ("cloze", "ppl", "nextsent")


def is_local_task(name: str) -> bool:
    return name == LOCAL_ALIAS or name.startswith(LOCAL_PREFIX)


def local_task_name(kind: str, corpus_name: str) -> str:
    return f"{LOCAL_PREFIX}{kind}_{corpus_name}"


def local_tasks_for(corpus_name: str) -> list[str]:
    return [local_task_name(kind, corpus_name) for kind in LOCAL_KINDS]


def parse_local_task(name: str) -> Optional[tuple[str, str]]:
    """`local_cloze_python_docs` -> ("cloze", "python_docs"); None when the name is not a local task."""
    if not name.startswith(LOCAL_PREFIX):
        return None
    kind, _, corpus_name = name[len(LOCAL_PREFIX) :].partition("_")
    if kind not in LOCAL_KINDS or not corpus_name:
        return None
    return kind, corpus_name


def local_task_problem(name: str) -> Optional[str]:
    if parse_local_task(name) is None:
        return (
            f"eval task {name!r} is not a local task; local tasks are named local_<kind>_<corpus> "
            f"with kind one of {', '.join(LOCAL_KINDS)} (or just 'local' for the run's corpus)."
        )
    return None


def split_tasks(tasks: list[str], corpus_name: str) -> tuple[list[str], list[str]]:
    """(local task names with `local` expanded, standard task names), each without duplicates, in order."""
    local: list[str] = []
    standard: list[str] = []
    for name in tasks:
        if name == LOCAL_ALIAS:
            local += [n for n in local_tasks_for(corpus_name) if n not in local]
        elif is_local_task(name):
            if name not in local:
                local.append(name)
        elif name not in standard:
            standard.append(name)
    return local, standard
