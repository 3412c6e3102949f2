"""`python -m sweeps.bench`: the sweep rows' arithmetic on known timelines (no time is asserted), their merge
into lit_modules.bench's bench.json (its keys kept, the sweep's added), and one real sweep timed."""

from __future__ import annotations

import json
import math

import pytest

from lit_modules.bench.record import merged
from lit_modules.bench.settings import Settings
from sweeps import bench, bench_timeline


def test_the_sweep_row_on_known_timelines(monkeypatch, tmp_path):
    # One worker: 6 trials of 10 s with 1 s between them (span 65 s). Two workers: trials of 16 s (one
    # thread each), the second worker starting 6 s late, 1 s gaps: spans 16+1+16+1+16 = 50 s and 56 s.
    def fake(workers, trials, extra, trial_seconds, timelines):
        if workers == 1:
            spans = [(11.0 * i, 11.0 * i + 10.0) for i in range(6)]
        else:
            spans = sorted([(17.0 * i, 17.0 * i + 16.0) for i in range(3)] +
                           [(6.0 + 17.0 * i, 22.0 + 17.0 * i) for i in range(3)])
        trial_seconds.append(16.0 if workers == 2 else 10.0)
        timelines.append({"span_s": max(e for _, e in spans), "trials": spans,
                          "workers": bench_timeline.assign_workers(spans), "startup_s": 7.0, "teardown_s": 5.0})
        return timelines[-1]["span_s"]

    monkeypatch.setattr(bench_timeline, "sweep_seconds", fake)
    ratios, rows = [], []
    bench.sweep_rows(Settings(blocks=6, block_steps=1, warmup=0, sweep_repeats=2), ratios, rows)
    by_key = {r.key: r for r in ratios}
    assert by_key["sweep_2_workers_vs_1"].median == pytest.approx(65 / 56)
    assert by_key["sweep_2_workers_ideal"].median == pytest.approx(2 / 1.6)  # one trial: 1.6x faster on 2 threads
    assert by_key["sweep_2_workers_efficiency"].median == pytest.approx((65 / 56) / 1.25)
    assert by_key["sweep_2_workers_efficiency"].target.bound == 0.95
    row = rows[0]
    assert row["two_workers_start_skew_s"] == [6.0, 6.0] and row["two_workers_median_gap_s"] == [1.0, 1.0]
    assert row["one_worker_median_gap_s"] == [1.0, 1.0] and row["two_workers_tail_s"] == [6.0, 6.0]
    assert row["efficiency_without_start_skew"][0] == pytest.approx((65 / 50) / 1.25)


def test_trials_are_chained_into_workers_and_the_losses_named():
    spans = [(0.0, 10.0), (4.0, 14.0), (11.0, 21.0), (15.0, 25.0), (22.0, 30.0)]
    assert bench_timeline.assign_workers(spans) == [[0, 2, 4], [1, 3]]
    losses = bench_timeline.timeline_losses({"trials": spans, "workers": bench_timeline.assign_workers(spans)})
    assert losses == {"start_skew_s": 4.0, "median_gap_s": 1.0, "tail_s": 5.0, "median_trial_s": 10.0}


def test_sweep_seconds_times_a_real_sweep_from_its_first_trial_to_its_last():
    from sweeps.bench_timeline import sweep_seconds

    per_trial: list[float] = []
    seconds = sweep_seconds(1, 2, ["trainer.max_steps=3", "data.seq_len=32", "data.batch_size=4"], trial_seconds=per_trial)
    assert math.isfinite(seconds) and seconds > 0
    # One worker runs its two trials one after the other: the median trial takes at most half the span.
    assert len(per_trial) == 1 and 0 < per_trial[0] <= seconds / 2 + 1e-3


def test_the_sweep_rows_merge_into_the_single_process_bench_json(tmp_path, monkeypatch):
    out = tmp_path / "bench.json"
    before = {"eval_batched_vs_single": 3.0, "sweep_2_workers_vs_1": 9.0, "noisy": ["eval_batched_vs_single",
              "sweep_2_workers_vs_1"], "details": {"eval_batched_vs_single": {"median": 3.0},
              "sweep_2_workers_vs_1": {"median": 9.0}}, "rows": [{"bench": "eval_adapter"}, {"bench": "sweep"}],
              "method": {"quick": True}, "machine": {"command": "python -m lit_modules.bench"}}
    out.write_text(json.dumps(before))

    def rows(s, ratios, rows_):
        ratios.append(bench.Ratio("sweep_2_workers_vs_1", (1.5,) * 6, clock="wall"))
        rows_.append({"bench": "sweep", "two_workers_start_skew_s": [1.0], "two_workers_median_gap_s": [0.1],
                      "one_worker_median_gap_s": [0.1], "two_workers_tail_s": [0.0],
                      "efficiency_without_start_skew": [1.0], "startup_s": [2.0], "teardown_s": [0.5]})

    monkeypatch.setattr(bench, "sweep_rows", rows)
    assert bench.main(["--quick", "--out", str(out)]) == 0
    after = json.loads(out.read_text())
    assert after["eval_batched_vs_single"] == 3.0 and after["sweep_2_workers_vs_1"] == 1.5
    assert after["noisy"] == ["eval_batched_vs_single"]  # the old sweep figure's verdict is replaced
    assert [r["bench"] for r in after["rows"]] == ["eval_adapter", "sweep"]
    assert after["rows"][1]["startup_s"] == [2.0] and after["method"] == {"quick": True}
    assert after["machine"]["also"][0]["command"].startswith("python -m sweeps.bench")
    assert bench.main(["--only", "eval", "--out", str(out)]) == 0  # no sweep asked: the file is untouched
    assert json.loads(out.read_text()) == after


def test_a_merge_into_nothing_is_the_sweep_summary_alone():
    added = {"k": 1.0, "noisy": [], "details": {"k": {}}, "rows": [], "method": {}, "machine": {"command": "c"}}
    assert merged({}, added, {"sweep"}) == {"k": 1.0, "noisy": [], "details": {"k": {}}, "rows": [], "method": {},
                                            "machine": {"also": [{"command": "c"}]}}
