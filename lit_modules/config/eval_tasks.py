"""Names of the local (offline) tasks, the standard (lm-eval, hub) ones, and how a task list splits into both.

A local task is `local_<kind>_<corpus>`; `local` alone means all kinds for the run's own corpus. A standard
task is any task, group or tag lm-eval's own index knows (read from its installed task files, offline).
"""

from __future__ import annotations

import difflib
import fnmatch
from pathlib import Path
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


def standard_task_names() -> frozenset[str]:
    """Every task, group and tag name lm-eval knows (a small index of its installed task files, lm_eval_index)."""
    from lit_modules.config.lm_eval_index import standard_task_names as names

    return names()


def paper_tasks() -> list[str]:
    """The papers' zero-shot suite (conf/eval/zero_shot.yaml), the standard tasks a sentence names first."""
    from omegaconf import OmegaConf

    from lit_modules.config import files

    return list(OmegaConf.load(files.CONF_DIR / "eval" / "zero_shot.yaml").tasks)


def unknown_task_sentence(standard: list[str], corpus_name: Optional[str] = None,
                          key: str = "eval.tasks") -> Optional[str]:
    """One sentence naming the standard task names lm-eval does not know (lm-eval also loads a glob that
    matches one, or a task file), the local tasks, the papers' suite and the closest known names; None when
    every name is known. `key` is the word the user set the tasks with (`tasks=` for make eval)."""
    known = standard_task_names()
    unknown = [t for t in standard if t not in known and not fnmatch.filter(known, t) and not Path(t).is_file()]
    if not unknown:
        return None
    local = ", ".join(local_tasks_for(corpus_name)) if corpus_name else f"{LOCAL_PREFIX}<kind>_<corpus>"
    close = [c for t in unknown for c in difflib.get_close_matches(t, sorted(known), n=3, cutoff=0.75)]
    which = "which is" if len(unknown) == 1 else "which are"
    return (
        f"{key} names {', '.join(map(repr, unknown))}, {which} neither a local task ({LOCAL_ALIAS}, {local}) "
        f"nor one of lm-eval's {len(known):,} standard tasks (the papers' suite: {', '.join(paper_tasks())}"
        + (f"; closest: {', '.join(dict.fromkeys(close))}" if close else "") + ")."
    )
