"""A researcher's own hypothesis (report.yaml `claim.source: hypothesis`) is "the claim" in every verdict, never
"the paper"; the reader's check reads it as it reads a paper's."""

import pytest

from analysis.claims import Check, Claim, claim_from_data
from analysis.families import UNDECLARED
from analysis.verdict_audit import audit_table
from analysis.verdict_table import verdicts_table
from tests.helpers.handmade_ablation import handmade

VALUES = {"baseline": [3.0, 3.01, 3.02, 3.03], "trick": [2.9, 2.905, 2.92, 2.93]}


def _claim(source):
    return Claim(preset="toy", paper="-", statement="-", paper_scale="-", paper_tokens=None,
                 checks=(Check("val/loss", "lower", "-", effects={"trick": -0.05}),), default_expect="better",
                 paper_tpp=20.0, source=source)


def test_a_hypothesis_is_called_the_claim():
    rows = verdicts_table(handmade(VALUES), _claim("hypothesis"), UNDECLARED)
    row = rows[rows["arm"] == "trick"].iloc[0]
    assert row["verdict"] == "reproduced" and "the claim's effect -0.05" in row["reason"]
    assert "paper" not in row["reason"] and audit_table(rows) == []
    secondary = verdicts_table(handmade(VALUES), _claim("hypothesis"), UNDECLARED.__class__(primary=(), declared=True))
    assert secondary[secondary["arm"] == "trick"].iloc[0]["verdict"] == "consistent with the claim"
    assert audit_table(secondary) == []
    paper = verdicts_table(handmade(VALUES), _claim("paper"), UNDECLARED)
    assert "the paper's effect -0.05" in paper[paper["arm"] == "trick"].iloc[0]["reason"]


def test_a_claims_source_is_read_from_its_report_yaml_and_checked():
    data = {"paper": "-", "statement": "-", "paper_scale": "-", "checks": [], "source": "hypothesis"}
    assert claim_from_data("mine", data).source == "hypothesis"
    with pytest.raises(ValueError, match="source is one of paper, hypothesis"):
        claim_from_data("mine", {**data, "source": "blog"})
