"""`make bench` writes bench.json with medians, `noisy` and details, and --strict fails on a noisy ratio."""

from __future__ import annotations

import json

import pytest

from lit_modules.bench.__main__ import main


def test_one_repeat_is_written_and_called_noisy_and_strict_fails_on_it(tmp_path):
    out = tmp_path / "bench.json"
    assert main(["--only", "eval", "--repeats", "1", "--out", str(out)]) == 0
    written = json.loads(out.read_text())
    assert written["eval_batched_vs_single"] > 0
    assert written["noisy"] == ["eval_batched_vs_single"]  # one repeat: its noise is unknown
    assert written["details"]["eval_batched_vs_single"]["problems"] == ["one repeat: its noise is unknown"]
    assert written["rows"][0]["identical"] is True  # batched and one-at-a-time scores, bit for bit
    assert {"load_average_before", "commit", "command"} <= set(written["machine"])
    assert main(["--only", "eval", "--repeats", "1", "--out", str(out), "--strict"]) == 1


def test_an_unknown_bench_is_refused_before_anything_runs(tmp_path, capsys):
    with pytest.raises(SystemExit) as refused:
        main(["--only", "eval,speed", "--out", str(tmp_path / "b.json")])
    assert refused.value.code == 2
    assert "--only: unknown bench speed" in capsys.readouterr().err
    assert not (tmp_path / "b.json").exists()
