"""Committed results keep their meaning. A folder that ran under its protocol file as it is now (its provenance
records the file's sha256): every committed cell (each run of results/<paper>/data/runs.csv: test cells,
learning-rate tuning cells, fine-tune tuning bases) is a cell the protocol's plan makes, and it composes, as the
launcher composes it, to the config hash it recorded (a change that changed a cell's config would make the driver
run it again instead of finding it finished), and the protocol declares what the provenance recorded. A folder
from an earlier revision is judged by its own record: its recorded `checks`, seeds and grids hash to the
checks_sha256 it recorded when its cells ran."""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict

import pytest

from analysis.claims import claim_for
from analysis.families import checks_sha256, families_for
from analysis.protocol_revision import is_superseded
from sweeps.ablate import _config_hash, validate_cells
from sweeps.evidence import plan
from sweeps.evidence.args import EvidenceArgs
from sweeps.evidence.declared import declared_checks
from sweeps.evidence.protocol_file import load_spec
from sweeps.evidence.spec import Block
from tests.helpers.committed_cells import PAPERS, committed_cells, split_kind
from tests.helpers.runs import REPO


def planned(spec, cell, tested: dict[str, float]) -> plan.Cell:
    """The plan's cell for a committed one: a test cell (a tuned arm's at the rate it ran at; a control's at its
    reference's rate, as the reference's test cells ran), a tuning cell at its rate, or a fine-tune tuning base
    (at its arm's pre-training rate, as that arm's test cells ran). `tested`: test cell -> the rate it ran at."""
    arm, kind = split_kind(cell.arm) if cell.arm not in spec.arms else (cell.arm, "test")
    if kind == "lr":
        tuning = next(t for t in spec.lr_tuning if arm in t.arms)
        made = plan.lr_tuning_cells(spec, [(tuning, arm, (cell.rate(tuning.key),), (cell.seed,))])
    elif kind == "ft":
        made = [c for c in plan.finetune_tuning_bases(spec, tested) if c.name == cell.arm and c.seed == cell.seed]
    else:
        source = spec.rate_source(arm)
        assert source is None or source[0] in tested, f"{cell.arm} runs at {source[0]}'s rate: no committed test cell"
        chosen = {source[0]: tested[source[0]]} if source is not None else \
            {arm: cell.rate(t.key) for t in spec.lr_tuning if arm in t.arms}
        made = plan.block_cells(spec, [Block((arm,), (cell.seed,))], chosen)
    [one] = made
    assert (one.name, one.seed) == (cell.arm, cell.seed)
    return one


def provenance(paper: str) -> dict:
    return json.loads((REPO / "results" / paper / "provenance.json").read_text())


def current_only(paper: str) -> dict:
    """The folder's provenance, or a skip when its cells ran under an earlier revision of the protocol file
    (its rerun is pending; the cells of today's file would not be its cells)."""
    record = provenance(paper)
    if is_superseded(f"evidence/{paper}", record):
        pytest.skip(f"results/{paper} is from an earlier revision of conf/evidence/{paper}.yaml")
    return record


@pytest.mark.parametrize("paper", PAPERS)
def test_every_committed_cell_composes_to_its_recorded_config_hash(paper: str) -> None:
    current_only(paper)
    spec = load_spec(paper)
    cells = committed_cells(paper)
    keys = {a: t.key for t in spec.lr_tuning for a in t.arms}
    tested = {c.arm: c.rate(keys[c.arm]) for c in cells if c.arm in keys}  # a tuned arm's test cells, at its rate
    by_config = defaultdict(list)  # one composition per cell config; the seed is set on it, as the launcher does
    for cell in cells:
        one = planned(spec, cell, tested)
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


@pytest.mark.parametrize("paper", PAPERS)
def test_a_current_folder_records_what_its_protocol_declares(paper: str) -> None:
    record = current_only(paper)
    declared = declared_checks(load_spec(paper))
    assert (declared["checks_sha256"], declared["checks"]) == (record["checks_sha256"], record["checks"])


@pytest.mark.parametrize("paper", PAPERS)
def test_every_committed_folder_rehashes_from_its_own_record(paper: str) -> None:
    """What the analysis reads (the recorded `checks`, through families_for) with the claim and the recorded
    seeds and grids is what was hashed before the cells ran: the record was not edited since."""
    record = provenance(paper)
    assert "checks" in record, f"results/{paper}/provenance.json does not record the checks its cells ran under"
    protocol = {k: record[k] for k in ("declared_seeds", "lr_tuning", "finetune_lr_tuning") if k in record}
    families = families_for(f"evidence/{paper}", record)
    assert checks_sha256(families, claim_for(paper), protocol) == record["checks_sha256"]


def test_the_provenance_records_the_checks_node_and_the_protocol_files_bytes(protocol) -> None:
    """`checks` as parsed and the sha256 of the file's bytes: a comment changes the file's hash, not the checks'."""
    text = ("blocks:\n  - {arms: [baseline, no_decay], seeds: [0, 1]}\n"
            "checks:\n  primary:\n    - {arm: no_decay, metric: val/loss}\n")
    declared = declared_checks(load_spec(protocol(text)))
    assert declared["checks"] == {"primary": [{"arm": "no_decay", "metric": "val/loss"}]}
    assert declared["protocol_sha256"] == hashlib.sha256(("preset: smoke\n" + text).encode()).hexdigest()
    commented = declared_checks(load_spec(protocol(text + "# a comment\n")))
    assert commented["checks_sha256"] == declared["checks_sha256"]
    assert commented["protocol_sha256"] != declared["protocol_sha256"]
