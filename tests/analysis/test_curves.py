"""Tokens to reach a target loss, speedup and mean bands on constructed curves."""

import math

import pandas as pd
import pytest

from analysis.curves import mean_band, speedup_vs_baseline, tokens_to_target


def test_linear_interpolation_between_evaluations():
    tokens, values = [100, 200, 300], [3.0, 2.0, 1.0]
    assert tokens_to_target(tokens, values, 1.5) == pytest.approx(250.0)
    assert tokens_to_target(tokens, values, 2.0) == pytest.approx(200.0)  # reached exactly at a point
    assert tokens_to_target(tokens, values, 1.0) == pytest.approx(300.0)


def test_first_crossing_counts_on_a_non_monotone_curve():
    # Crosses 2.0 between 100 and 200 (3.0 -> 1.8), goes back up, crosses again later: the first counts.
    assert tokens_to_target([100, 200, 300, 400], [3.0, 1.8, 2.2, 1.0], 2.0) == pytest.approx(100 + 100 / 1.2)


def test_target_met_at_the_first_evaluation_returns_its_tokens():
    assert tokens_to_target([100, 200], [1.0, 0.5], 3.5) == 100.0


def test_never_reached_is_infinite_and_stated():
    assert tokens_to_target([100, 200, 300], [3.0, 2.0, 1.0], 0.5) == math.inf
    assert math.isnan(tokens_to_target([], [], 1.0))


def _curves(rows):
    return pd.DataFrame(rows, columns=["run_id", "key", "step", "tokens_seen", "value"])


def _curve(run_id, values, per_step=100):
    return [(run_id, "val/loss", i, (i + 1) * per_step, v) for i, v in enumerate(values)]


def test_speedup_is_baseline_tokens_over_arm_tokens_paired_by_seed():
    curves = _curves(
        _curve("b0", [4.0, 3.0, 2.0, 1.0]) + _curve("a0", [3.0, 1.0, 0.5, 0.4])  # reaches 1.0 at 200 tokens
        + _curve("b1", [4.0, 3.0, 2.0, 1.2]) + _curve("a1", [3.0, 2.0, 1.6, 0.8])  # 1.2 at 300 + 0.4/0.8*100
    )
    s = speedup_vs_baseline(curves, {"0": "a0", "1": "a1"}, {"0": "b0", "1": "b1"})
    assert s.seeds == ("0", "1")
    assert s.base_tokens == (400.0, 400.0)
    assert s.arm_tokens == (pytest.approx(200.0), pytest.approx(350.0))
    assert s.speedup == pytest.approx(400.0 / 275.0)
    assert s.per_seed == (pytest.approx(2.0), pytest.approx(400 / 350))
    assert s.not_reached == 0 and "1.51x by the reference's budget, 1.51x by first crossing" in s.describe()


def test_speedup_when_an_arm_never_reaches_the_target():
    curves = _curves(_curve("b0", [4.0, 3.0, 2.0, 1.0]) + _curve("a0", [4.0, 3.5, 3.0, 2.5]))
    s = speedup_vs_baseline(curves, {"0": "a0"}, {"0": "b0"})
    assert s.arm_tokens == (math.inf,)
    assert s.not_reached == 1 and s.speedup == 0.0
    assert s.upper_bound == pytest.approx(1.0)  # baseline needed 400; the arm was not there at 400
    assert s.describe() == ("did not reach the reference's final val/loss on 1 of 1 seeds; closest approach "
                            "+1.5000 nats above the target")


def test_mean_band_over_seeds():
    curves = _curves(_curve("r0", [3.0, 2.0]) + _curve("r1", [5.0, 4.0]) + _curve("r2", [1.0]))
    band = mean_band(curves, "val/loss", {"arm": ["r0", "r1"], "other": ["r2"]})
    arm = band[band["group"] == "arm"].set_index("tokens_seen")
    assert arm.loc[100, "mean"] == 4.0 and arm.loc[100, "min"] == 3.0 and arm.loc[100, "max"] == 5.0
    assert arm.loc[200, "n"] == 2
    assert band[band["group"] == "other"]["n"].tolist() == [1]


def _slower_arm_ablation(arm_budget: int):
    """pc_layer-shaped ablation: the baseline's loss falls linearly; adamw_pc4 sits 0.1 above it everywhere."""
    from analysis.ablation import Ablation

    finished, pieces = [], []
    for seed in ("0", "1", "2"):
        for arm, offset, budget in (("adamw_baseline", 0.0, 1000), ("adamw_pc4", 0.1, arm_budget)):
            run_id = f"{arm}-{seed}"
            tokens = list(range(100, budget + 1, 100))
            values = [3.0 - t / 1000 + offset + 0.001 * int(seed) for t in tokens]
            finished.append({"arm": arm, "seed": seed, "run_id": run_id, "metrics.val/loss": values[-1],
                             "params.budget.total_tokens": str(budget)})
            pieces.append(pd.DataFrame({"run_id": run_id, "key": "val/loss", "step": [t // 100 - 1 for t in tokens],
                                        "tokens_seen": tokens, "value": values}))
    finished = pd.DataFrame(finished)
    return Ablation("pc_layer", None, "adamw_baseline", ["adamw_baseline", "adamw_pc4"], finished, finished,
                    pd.concat(pieces, ignore_index=True))


def test_an_arm_that_never_reaches_the_target_gets_no_speedup_interval_but_its_closest_approach():
    from analysis.claims import claim_for
    from analysis.verdict import DID_NOT_REACH
    from analysis.verdict_table import verdicts_table

    table = verdicts_table(_slower_arm_ablation(arm_budget=1000), claim_for("pc_layer")).set_index(["arm", "metric"])
    row = table.loc[("adamw_pc4", "speedup")]
    assert row["verdict"] == DID_NOT_REACH and "on 3 of 3 seeds" in row["reason"]
    assert "closest approach +0.1000 nats" in row["reason"]  # 0.1 above its own seed's baseline, everywhere
    assert math.isnan(row["ci_low"]) and math.isnan(row["ci_high"]) and math.isnan(row["mdd"])
    # With half the reference's tokens the arm stops 0.6 nats short: the row says how far, not why.
    short = verdicts_table(_slower_arm_ablation(arm_budget=500), claim_for("pc_layer")).set_index(["arm", "metric"])
    assert short.loc[("adamw_pc4", "speedup"), "verdict"] == DID_NOT_REACH
    assert "closest approach +0.6" in short.loc[("adamw_pc4", "speedup"), "reason"]
