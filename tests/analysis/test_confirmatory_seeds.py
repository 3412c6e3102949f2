"""Confirmatory seeds: declared in the protocol, never used by a committed run (refused in one sentence
otherwise), and the only seeds the primary verdicts are decided on (analysis/seed_ranges.py, verdict_table)."""

import json

import pandas as pd
import pytest

from analysis.claims import Check, Claim
from analysis.families import CheckKey, Families, parse_families
from analysis.seed_ranges import committed_seeds, confirmatory_problem
from analysis.verdict_table import verdicts_table
from lit_modules.config.errors import ConfigError
from tests.helpers.handmade_ablation import handmade

CLAIM = Claim(preset="toy", paper="-", statement="-", paper_scale="-", paper_tokens=None,
              checks=(Check("val/loss", "lower", "-"), Check("val/bits_per_byte", "lower", "-")),
              default_expect="better", paper_tpp=20.0)


def test_the_primary_rows_use_the_confirmatory_seeds_only():
    base = [3.0 + 0.01 * i for i in range(8)]
    ab = handmade({"baseline": base, "trick": [b - 0.05 for b in base]})
    families = Families(primary=(CheckKey("trick", "val/loss"),), confirmatory_seeds=(4, 5, 6, 7))
    rows = verdicts_table(ab, CLAIM, families).set_index("metric")
    assert rows.loc["val/loss", "role"] == "primary" and rows.loc["val/loss", "seeds"] == "4,5,6,7"
    assert rows.loc["val/loss", "n"] == 4


def _results(tmp_path, seeds, confirmatory=None):
    folder = tmp_path / "results" / "paper"
    (folder / "data").mkdir(parents=True)
    pd.DataFrame({"tags.seed": [str(s) for s in seeds]}).to_csv(folder / "data" / "runs.csv", index=False)
    if confirmatory is not None:
        (folder / "provenance.json").write_text(json.dumps({"confirmatory_seeds": confirmatory}))
    return tmp_path / "results"


def test_a_seed_any_committed_run_used_is_refused_in_one_sentence(tmp_path):
    results = _results(tmp_path, [0, 1, 100, 101])
    assert sorted(committed_seeds(results)) == [0, 1, 100, 101]
    problem = confirmatory_problem((100, 200), "conf/evidence/toy.yaml", results)
    assert problem == ("conf/evidence/toy.yaml: checks.confirmatory_seeds must be seeds no committed run has used, "
                       "but 1 of them (100) already ran in results/paper; declare a fresh range (e.g. from 102).")
    assert confirmatory_problem((200, 201), "x", results) == ""


def test_a_frozen_protocols_own_confirmatory_seeds_do_not_count(tmp_path):
    results = _results(tmp_path, [0, 1, 200, 201], confirmatory=[200, 201])
    assert sorted(committed_seeds(results)) == [0, 1]


def test_the_declaration_is_checked():
    with pytest.raises(ConfigError, match="confirmatory_seeds is a list of seeds"):
        parse_families({"confirmatory_seeds": ["a"]}, "x")
    assert parse_families({"confirmatory_seeds": [300, 301]}, "x").confirmatory_seeds == (300, 301)


def test_the_provenance_records_the_declared_confirmatory_seeds():
    from sweeps.evidence.declared import declared_checks
    from sweeps.evidence.protocol_file import load_spec

    spec = load_spec("wisca")
    assert declared_checks(spec)["confirmatory_seeds"] == list(range(200, 208))  # as conf/evidence/wisca.yaml
    undeclared = {k: v for k, v in spec.checks.items() if k != "confirmatory_seeds"}
    bare = type(spec)(**{**spec.__dict__, "checks": undeclared})
    assert "confirmatory_seeds" not in declared_checks(bare)  # none declared: the record as it was
    checks = {**spec.checks, "confirmatory_seeds": [900, 901, 902]}
    assert declared_checks(type(spec)(**{**spec.__dict__, "checks": checks}))["confirmatory_seeds"] == [900, 901, 902]
