"""Exploratory or evidence: a primary below its regime, or tuned at its grid's edge, keeps its protocol out of
RESULTS.md (analysis/exploratory.py); an underpowered one is said in its row; shipped protocols pass."""

import math

import pandas as pd

from analysis.exploratory import EXPLORATORY, edge_rates, gated, ledger_gate
from analysis.verdict import PRIMARY, SECONDARY
from tests.helpers.handmade_ablation import handmade


def _row(arm="trick", role=PRIMARY, matched=True, tpp=20.0, n=5, needed=math.nan, variant="-"):
    return {"arm": arm, "reference": "baseline", "metric": "val/loss", "role": role, "matched": matched, "tpp": tpp,
            "paper_tpp": 20.0, "n": n, "seeds_needed": needed, "variant": variant}


def _tuned():
    """Two tuning seeds (0, 1) per rate; the trick is best at its grid's top rate, the baseline inside."""
    values = {"baseline@lr1e-3": [3.2, 3.21], "baseline@lr2e-3": [3.0, 3.01], "baseline@lr4e-3": [3.1, 3.11],
              "trick@lr1e-3": [3.3, 3.31], "trick@lr2e-3": [3.2, 3.21], "trick@lr4e-3": [3.1, 3.11]}
    record = {"lr_tuning": [{"arms": ["baseline", "trick"], "grid": [1e-3, 2e-3, 4e-3], "tuning_seeds": [0, 1],
                             "metric": "val/loss", "key": "optim.lr"}]}
    return handmade(values), record


def test_a_rate_chosen_at_its_grids_edge_is_found():
    ab, record = _tuned()
    edges = edge_rates(ab, record)
    assert list(edges) == ["trick"] and "the highest of 0.001, 0.002, 0.004" in edges["trick"]
    assert edge_rates(ab, {}) == {}


def test_each_gate_is_said_in_the_row_and_two_keep_the_protocol_out():
    ab, record = _tuned()
    rows = pd.DataFrame([_row(), _row(arm="other", matched=False, tpp=1.4), _row(arm="weak", n=5, needed=17),
                         _row(arm="side", role=SECONDARY, matched=False)])
    out = gated(rows, ab, record)
    assert out.loc[0, EXPLORATORY].startswith("tuned rate at its grid's edge: `trick` chose 0.004")
    assert out.loc[1, EXPLORATORY] == "below its regime: 1.4 TPP where the claim is judged at >= 20"
    assert out.loc[2, EXPLORATORY] == "underpowered: 5 seeds where 80% power against the claim's effect needs 17"
    assert out.loc[3, EXPLORATORY] == ""  # a secondary row is no claim's verdict
    gate = ledger_gate(out)
    assert len(gate) == 2 and gate[0].startswith("`trick` on `val/loss`: tuned rate") and "below its regime" in gate[1]
    assert ledger_gate(out.drop(index=[0, 1])) == []  # underpowered alone keeps nothing out


def test_a_tuned_comparison_is_gated_on_its_family():
    ab, record = _tuned()
    out = gated(pd.DataFrame([_row(arm="trick@lr4e-3", variant="tuned")]), ab, record)
    assert "`trick` chose 0.004" in out.loc[0, EXPLORATORY]


def test_no_shipped_protocol_is_kept_out():
    from pathlib import Path

    results = Path(__file__).resolve().parents[2] / "results"
    for paper in ("mols", "pc_layer", "small_init", "wd_plasticity", "wisca"):
        rows = pd.read_csv(results / paper / "verdicts.csv", keep_default_na=False)
        primary = rows[rows["role"] == PRIMARY]
        assert not primary[EXPLORATORY].str.contains("regime|edge").any(), paper
