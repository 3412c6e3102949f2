"""Refactor guard: today's code reproduces the committed 30-step metric histories exactly."""

import json

import pytest

from lit_modules.goldens import CASES, DEFAULT_FILE, differences, record


def test_every_golden_case_is_recorded() -> None:
    assert set(json.loads(DEFAULT_FILE.read_text())) == set(CASES)


@pytest.mark.parametrize("case", sorted(CASES))
def test_code_reproduces_the_golden_history_exactly(case: str) -> None:
    expected = {case: json.loads(DEFAULT_FILE.read_text())[case]}
    assert differences(expected, record([case])) == []


def test_differences_name_the_first_differing_step() -> None:
    a = {"c": {"metrics": {"val/loss": [[0, 1.0], [10, 2.0]]}}}
    b = {"c": {"metrics": {"val/loss": [[0, 1.0], [10, 2.5]]}}}
    assert differences(a, a) == []
    assert differences(a, b) == ["c val/loss: first differs at step 10: 2.0 vs 2.5"]
