"""The names lm-eval knows (every task, group and tag of its installed task files), read from a small index.

lm-eval's own index (`TaskManager().all_tasks`) parses ~15k YAML files: seconds of CPU before a mistyped task
name could be refused. `lm_eval_tasks.txt.gz` beside this file holds the same names for the lm-eval version
on its first line; it is used when that is the installed version, and lm-eval's own index otherwise (correct
first; rebuild the file for the new version with `python -m lit_modules.config.lm_eval_index`).
"""

from __future__ import annotations

import functools
import gzip
from importlib import metadata
from pathlib import Path

INDEX = Path(__file__).with_name("lm_eval_tasks.txt.gz")
HEADER = "# lm-eval "  # first line: "# lm-eval <version>"


def installed_version() -> str | None:
    try:
        return metadata.version("lm_eval")
    except metadata.PackageNotFoundError:
        return None


def read_index(path: Path = INDEX) -> tuple[str | None, frozenset[str]]:
    """(the lm-eval version the index was made from, its names); (None, empty) when there is no index."""
    if not path.is_file():
        return None, frozenset()
    lines = gzip.decompress(path.read_bytes()).decode("utf-8").splitlines()
    if not lines or not lines[0].startswith(HEADER):
        return None, frozenset()
    return lines[0][len(HEADER):].strip(), frozenset(line for line in lines[1:] if line)


def registry_names() -> frozenset[str]:
    """lm-eval's own index of its installed task files (seconds, no network)."""
    from lm_eval.tasks import TaskManager

    return frozenset(TaskManager().all_tasks)


@functools.cache
def standard_task_names() -> frozenset[str]:
    """Every task, group and tag name the installed lm-eval knows: the index when it was made from this
    version, lm-eval's own index otherwise."""
    version, names = read_index()
    if names and version == installed_version():
        return names
    return registry_names()


def write_index(path: Path = INDEX) -> int:
    """Write the installed lm-eval's names to `path` (deterministic bytes: sorted, no gzip timestamp)."""
    names = sorted(registry_names())
    text = f"{HEADER}{installed_version()}\n" + "".join(f"{name}\n" for name in names)
    path.write_bytes(gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0))
    return len(names)


if __name__ == "__main__":
    print(f"{write_index()} names of lm-eval {installed_version()} -> {INDEX}")
