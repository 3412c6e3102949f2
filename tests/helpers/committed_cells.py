"""The committed cells of the five evidence protocols: every run of results/<paper>/data/runs.csv, with the
config hash it recorded (`tags.config_hash`), as the protocol would compose it again today.

A row is one of three kinds, read from its arm name and the protocol:
  - a test cell `<arm>` (a tuned arm's at the rate it ran at: params.optim.lr, or optim.muon_lr for Muon),
  - a learning-rate tuning cell `<arm>@lr<rate>` of an arm some `lr_tuning` grid tunes,
  - a fine-tune tuning base `<arm>@ft_tuning` (`finetune_lr_tuning`).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass

from tests.helpers.runs import REPO

PAPERS = ("mols", "pc_layer", "small_init", "wd_plasticity", "wisca")
LR_MARK, FT_MARK = "@lr", "@ft_tuning"


@dataclass(frozen=True)
class CommittedCell:
    paper: str
    arm: str  # the cell's name as it ran (tags.ablation.arm)
    seed: int
    config_hash: str
    lr: float  # params.optim.lr as it ran
    muon_lr: float  # params.optim.muon_lr as it ran

    def rate(self, key: str) -> float:
        return self.muon_lr if key == "optim.muon_lr" else self.lr


def committed_cells(paper: str) -> list[CommittedCell]:
    """One per row of the paper's committed runs.csv (a cell run twice, killed then finished, twice)."""
    with open(REPO / "results" / paper / "data" / "runs.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    return [CommittedCell(paper, r["tags.ablation.arm"], int(r["tags.seed"]), r["tags.config_hash"],
                          float(r["params.optim.lr"]), float(r["params.optim.muon_lr"])) for r in rows]


def split_kind(arm: str) -> tuple[str, str]:
    """(`<arm>`, kind) of a committed cell's name: kind 'test', 'lr' (a tuning cell) or 'ft' (a tuning base)."""
    if arm.endswith(FT_MARK):
        return arm[: -len(FT_MARK)], "ft"
    head, sep, tail = arm.rpartition(LR_MARK)
    if sep and tail[:1].isdigit():
        return head, "lr"
    return arm, "test"
