"""Committed results keep their meaning: every committed cell of every protocol (each run of
results/<paper>/data/runs.csv: test cells, learning-rate tuning cells, fine-tune tuning bases) composes,
through the evidence driver's own path, to the config hash it recorded. A change to a protocol's files that
changed a cell's config would make the driver run it again instead of finding it finished."""

from __future__ import annotations

from collections import defaultdict

import pytest

from sweeps import lr_tuning
from sweeps.ablate import _config_hash, parse_args, read_grid, validate_cells
from sweeps.evidence import Block, EvidenceArgs, block_argv, load_spec
from sweeps.finetune_tuning import tuning_blocks
from tests.helpers.committed_cells import PAPERS, committed_cells, split_kind


def _extra(spec, arm: str, kind: str, rate_of) -> tuple[str, list[str]]:
    """(the protocol arm, the overrides the driver adds) for a committed cell of this kind."""
    if kind == "lr":
        tuning = next(t for t in spec.lr_tuning if arm in t.arms)
        return arm, lr_tuning.tuning_overrides(tuning, arm, (rate_of(tuning.key),))
    if kind == "ft":
        (arms, _, extra), = [b for b in tuning_blocks(spec.finetune_lr_tuning) if b[0] == (arm,)]
        return arm, extra
    tuned = {a: t.key for t in spec.lr_tuning for a in t.arms}
    return arm, [f"{tuned[arm]}={rate_of(tuned[arm])!r}"] if arm in tuned else []


@pytest.mark.parametrize("paper", PAPERS)
def test_every_committed_cell_composes_to_its_recorded_config_hash(paper: str) -> None:
    spec = load_spec(paper)
    cells = committed_cells(paper)
    by_call = defaultdict(list)  # one composition per (arm, overrides); the seed is set on it, as the driver does
    for cell in cells:
        arm, kind = split_kind(cell.arm)
        arm, extra = _extra(spec, arm, kind, cell.rate)
        by_call[(arm, tuple(extra))].append(cell)
    wrong = []
    for (arm, extra), group in by_call.items():
        grid = parse_args(block_argv(spec, Block((arm,), tuple(sorted({c.seed for c in group}))), EvidenceArgs())
                          + list(extra))
        read_grid(grid)
        validate_cells(grid)
        wrong += [f"{c.arm} seed {c.seed}" for c in group
                  if _config_hash(grid.first_config.copy(), str(c.seed)) != c.config_hash]
    assert not wrong, f"{len(wrong)} of {len(cells)} committed cells of {paper} compose to another hash: {wrong[:10]}"
    assert len(cells) > 90
