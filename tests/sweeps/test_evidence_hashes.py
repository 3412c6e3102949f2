"""Committed results keep their meaning: every committed cell of every protocol (each run of
results/<paper>/data/runs.csv: test cells, learning-rate tuning cells, fine-tune tuning bases) is a cell the
protocol's plan makes, and it composes, as the launcher composes it, to the config hash it recorded. A change
to a protocol that changed a cell's config would make the driver run it again instead of finding it finished.
The checks_sha256 of what each protocol declares stays what it was before protocols became one file."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from sweeps.ablate import _config_hash, validate_cells
from sweeps.evidence import plan
from sweeps.evidence.args import EvidenceArgs
from sweeps.evidence.declared import declared_checks
from sweeps.evidence.protocol_file import load_spec
from sweeps.evidence.spec import Block
from tests.helpers.committed_cells import PAPERS, committed_cells, split_kind
from tests.helpers.runs import REPO


def planned(spec, cell) -> plan.Cell:
    """The plan's cell for a committed one: a test cell (a tuned arm's at the rate it ran at), a tuning cell
    at its rate, or a fine-tune tuning base."""
    arm, kind = split_kind(cell.arm) if cell.arm not in spec.arms else (cell.arm, "test")
    if kind == "lr":
        tuning = next(t for t in spec.lr_tuning if arm in t.arms)
        made = plan.lr_tuning_cells(spec, [(tuning, arm, (cell.rate(tuning.key),), (cell.seed,))])
    elif kind == "ft":
        made = [c for c in plan.finetune_tuning_bases(spec) if c.name == cell.arm and c.seed == cell.seed]
    else:
        chosen = {arm: cell.rate(t.key) for t in spec.lr_tuning if arm in t.arms}
        made = plan.block_cells(spec, [Block((arm,), (cell.seed,))], chosen)
    [one] = made
    assert (one.name, one.seed) == (cell.arm, cell.seed)
    return one


@pytest.mark.parametrize("paper", PAPERS)
def test_every_committed_cell_composes_to_its_recorded_config_hash(paper: str) -> None:
    spec = load_spec(paper)
    cells = committed_cells(paper)
    by_config = defaultdict(list)  # one composition per cell config; the seed is set on it, as the launcher does
    for cell in cells:
        one = planned(spec, cell)
        by_config[(one.name, one.words)].append(cell)
    wrong = []
    for (name, words), group in by_config.items():
        seeds = sorted({c.seed for c in group})
        [grid] = plan.launch_grids(spec, [plan.Cell(name, s, words) for s in seeds], EvidenceArgs())
        validate_cells(grid)  # what the launcher does with the grid: compose, validate, hash every cell
        recorded = {_config_hash(grid.first_config.copy(), str(s)) for s in seeds}
        assert recorded <= grid.cell_hashes
        wrong += [f"{c.arm} seed {c.seed}" for c in group
                  if _config_hash(grid.first_config.copy(), str(c.seed)) != c.config_hash]
    assert not wrong, f"{len(wrong)} of {len(cells)} committed cells of {paper} compose to another hash: {wrong[:10]}"
    assert len(cells) > 90


RECORDED_CHECKS = json.loads((REPO / "tests/assets/protocol_checks_sha256.json").read_text())


@pytest.mark.parametrize("paper", PAPERS)
def test_what_a_protocol_declares_keeps_its_checks_hash(paper: str) -> None:
    """Recorded from the protocols before they became one file; equal to the committed provenance's hash
    for the protocols unchanged since their cells ran (mols, wd_plasticity, wisca)."""
    assert declared_checks(load_spec(paper))["checks_sha256"] == RECORDED_CHECKS[paper]
    provenance = json.loads((REPO / "results" / paper / "provenance.json").read_text())
    if paper in ("mols", "wd_plasticity", "wisca"):
        assert provenance["checks_sha256"] == RECORDED_CHECKS[paper]
