"""The words of `python -m sweeps.evidence` (`make evidence`), read into EvidenceArgs before anything loads.

    python -m sweeps.evidence [papers=wisca,pc_layer,...] [stages=headline,below,scale] [workers=N] [runs_dir=runs]
                              [results_dir=results] [ledger=RESULTS.md] [export_only=true]
                              [finetune.<field>=value] [run overrides]

`export_only=true` runs no cell: it exports each paper's grid as the store holds it (a stopped call's finished
cells, to be committed before the machine is given up; the next call restores them from the export).

Every word that is none of these is a run override for every cell (`dry_run=true` among them: compose and
validate every cell, run nothing).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, fields

from lit_modules.config import files
from lit_modules.config.arguments import FLAG, HYDRA, NAMES, POSITIVE_INT, Arg, Prefix, Verb, parse_words
from lit_modules.config.errors import ConfigError
from lit_modules.config.finetune_recipe import FinetuneRecipe
from sweeps.evidence.protocol_file import known_papers
from sweeps.evidence.spec import STAGES

REPO = files.CONF_DIR.parent


@dataclass
class EvidenceArgs:
    papers: list[str] = field(default_factory=list)
    stages: list[str] = field(default_factory=lambda: ["headline"])
    workers: int | None = None
    runs_dir: str = "runs"
    results_dir: str = "results"
    ledger: str = str(REPO / "RESULTS.md")
    export_only: bool = False
    recipe_overrides: dict[str, str] = field(default_factory=dict)  # finetune.<field>=value
    overrides: list[str] = field(default_factory=list)  # run overrides for every cell


VERB = Verb(
    "evidence",
    {
        "papers": Arg(NAMES),
        "stages": Arg(NAMES, default=["headline"]),
        "workers": Arg(POSITIVE_INT),
        "runs_dir": Arg(default="runs", forward=True),  # every cell writes there too
        "results_dir": Arg(default="results"),
        "ledger": Arg(default=str(REPO / "RESULTS.md")),
        "export_only": Arg(FLAG, default=False),
    },
    aliases={"PAPERS": "papers", "STAGES": "stages"},
    prefixes={"finetune.": Prefix(tuple(f.name for f in fields(FinetuneRecipe)), "recipe field")},
    rest=HYDRA,  # run overrides for every cell
)


def parse_args(argv: list[str]) -> EvidenceArgs:
    words = parse_words(argv, VERB)
    unknown = [s for s in words["stages"] if s not in STAGES]
    if unknown:
        raise ConfigError(f"stages= names {', '.join(unknown)}; the stages are {', '.join(STAGES)}.")
    return EvidenceArgs(papers=words["papers"] or known_papers(), stages=list(words["stages"]), workers=words["workers"],
                        runs_dir=words["runs_dir"], results_dir=words["results_dir"], ledger=words["ledger"],
                        export_only=bool(words["export_only"]),
                        recipe_overrides=words.prefixed["finetune."], overrides=words.rest)


def override_value(overrides: list[str], key: str) -> str | None:
    """The last `key=value` (or `+key=value`) among the run overrides; None where absent or null."""
    values = [o.split("=", 1)[1] for o in overrides if o.lstrip("+").split("=", 1)[0] == key and "=" in o]
    return values[-1] if values and values[-1] not in ("null", "") else None


def recipe_named(overrides: list[str]) -> str | None:
    """The `recipe=<size>` among the run overrides, if any."""
    return override_value(overrides, "recipe")


def is_dry_run(overrides: list[str]) -> bool:
    return str(override_value(overrides, "dry_run")).lower() in ("true", "1", "yes")


def default_workers() -> int:
    return max(1, os.cpu_count() or 1)
