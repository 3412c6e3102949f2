"""A results folder derives from its own record: its families are the `checks` its provenance recorded (not the
protocol file's today), a folder whose provenance lacks the current protocol file's sha256 says, in its report
and in RESULTS.md, that it is from an earlier revision, and one whose declared stages have not all run says which."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from analysis.claims import claim_for
from analysis.families import families_for
from analysis.ledger import render_ledger
from analysis.protocol_revision import pending_line, pending_stages, protocol_sha256, superseded_line
from analysis.provenance import read_provenance
from analysis.report_context import ReportContext
from analysis.report_sections import header
from analysis.results_data import read_results_data
from lit_modules.config import files
from tests.helpers.runs import REPO

PAPER = "pc_layer"  # the smallest committed export
LINE = f"From an earlier revision of `conf/evidence/{PAPER}.yaml`"
ONLY_PC4 = {"primary": [{"arm": "adamw_pc4", "metric": "val/loss"}]}  # neither the old file's nor the current's


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """A copy of a committed export (data and provenance) in a results folder of the test's own."""
    out = tmp_path / "results" / PAPER
    shutil.copytree(REPO / "results" / PAPER / "data", out / "data")
    shutil.copy(REPO / "results" / PAPER / "provenance.json", out / "provenance.json")
    return out


def write(folder: Path, **changes: object) -> dict:
    record = {**json.loads((folder / "provenance.json").read_text()), **changes}
    (folder / "provenance.json").write_text(json.dumps(record))
    return record


def test_a_folder_without_the_current_protocol_files_hash_is_superseded(tmp_path: Path) -> None:
    current = protocol_sha256(files.group_dir("evidence") / f"{PAPER}.yaml")
    said = {}
    for name, record in {"none": {}, "other": {"protocol_sha256": "0" * 64},
                         "current": {"protocol_sha256": current}}.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "provenance.json").write_text(json.dumps(record))
        said[name] = superseded_line(f"evidence/{PAPER}", read_provenance(tmp_path / name))
    assert said["none"].startswith(LINE) and said["other"] == said["none"]
    assert "rerun on the current protocol is pending" in said["none"]
    assert said["current"] == ""
    assert superseded_line("smoke/no_decay", {}) == ""  # not an evidence protocol: no revision to be behind
    assert superseded_line(f"evidence/{PAPER}", None) == ""  # no record (a report from the store): nothing to say


def test_families_come_from_the_provenance_when_it_records_them(folder: Path) -> None:
    record = write(folder, checks=ONLY_PC4)
    assert [k.arm for k in families_for(f"evidence/{PAPER}", record).primary] == ["adamw_pc4"]
    text = render_ledger(folder.parent, folder.parent / "RESULTS.md")
    roles = {cells[2].strip(): cells[3].strip() for line in text.splitlines() if line.startswith(f"| `{PAPER}`")
             for cells in [line.split("|")]}
    assert roles["`adamw_pc4` vs `adamw_baseline` on `val/loss`"] == "primary"
    assert roles["`adamw_pc4` vs `adamw_baseline` on `speedup`"] == "secondary"  # primary in both protocol files
    assert roles["`muon_pc2` vs `muon_baseline` on `val/loss`"] == "secondary"
    assert f"- **{PAPER}**: _{LINE}" in text  # no protocol_sha256 recorded: an earlier revision
    file_families = families_for(f"evidence/{PAPER}", {k: v for k, v in record.items() if k != "checks"})
    assert [k.arm for k in file_families.primary] != ["adamw_pc4"]  # without a record: today's file


def test_the_report_header_says_so_and_a_current_folder_does_not(folder: Path) -> None:
    ab = read_results_data(folder)
    for recorded, expected in (({}, True), ({"protocol_sha256": protocol_sha256(
            files.group_dir("evidence") / f"{PAPER}.yaml")}, False)):
        record = write(folder, **recorded)
        body = "\n".join(header.section(ReportContext.of(ab, claim_for(PAPER), folder, record)).body)
        assert (LINE in body) is expected


def test_a_stage_with_a_test_cell_that_has_not_run_is_pending() -> None:
    import pandas as pd

    record = {"declared_seeds": [{"arms": ["a@l2", "b@l2"], "seeds": [200, 201], "stage": "below"},
                                 {"arms": ["a@l4", "b@l4"], "seeds": [200, 201], "stage": "headline"},
                                 {"arms": ["a@l4"], "seeds": [200], "stage": "headline"},  # declared twice: one cell
                                 {"arms": ["a@l6"], "seeds": [200, 201], "stage": "scale"}]}
    runs = pd.DataFrame({"arm": ["a@l2", "a@l2", "b@l2", "b@l2", "a@l4", "a@l2@lr3e-3", "b@l4", "a@l6"],
                         "seed": ["200", "201", "200", "201", "200", "100", "200", "200"],
                         "status": ["FINISHED"] * 6 + ["KILLED", "FAILED"]})  # killed: to run again; failed: ran
    assert pending_stages(record, runs) == {"headline": (1, 4), "scale": (1, 2)}
    assert pending_line(record, runs) == ("Partial export: the protocol's stages `headline` (1 of 4 test cells "
                                          "run), `scale` (1 of 2 test cells run) have not finished yet.")
    rest = pd.DataFrame({"arm": ["a@l4", "b@l4", "b@l4", "a@l6"], "seed": ["201", "200", "201", "201"],
                         "status": ["FINISHED", "FINISHED", "FAILED", "FINISHED"]})  # a failed cell has run
    whole = pd.concat([runs, rest])
    assert pending_stages(record, whole) == {} and pending_line(record, whole) == ""
    assert pending_line(None, runs) == "" and pending_line({}, runs) == ""  # nothing declared: nothing to say


def test_a_partial_folder_says_so_in_its_report_and_in_results_md(folder: Path) -> None:
    record = write(folder, declared_seeds=[*read_provenance(folder)["declared_seeds"],
                                           {"arms": ["adamw_baseline@l6"], "seeds": [200], "stage": "scale"}])
    ab = read_results_data(folder)
    body = "\n".join(header.section(ReportContext.of(ab, claim_for(PAPER), folder, record)).body)
    line = "Partial export: the protocol's stage `scale` (0 of 1 test cells run) has not finished yet."
    assert line in body
    assert line in render_ledger(folder.parent, folder.parent / "RESULTS.md")
