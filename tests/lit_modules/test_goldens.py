"""Refactor guard: today's code reproduces the committed 30-step metric histories exactly."""

import json

import pytest

from lit_modules.goldens import CASES, DEFAULT_FILE, FOREIGN_RTOL, FOREIGN_STEPS, differences, machine, record


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


def test_a_record_from_another_machine_is_checked_within_the_float_tolerance() -> None:
    here = {"c": {"machine": "A", "metrics": {"val/loss": [[0, 1.0], [10, 2.0]]}}}
    drifted = {"c": {"machine": "B", "metrics": {"val/loss": [[0, 1.0], [10, 2.0 * (1 + FOREIGN_RTOL / 2)]]}}}
    changed = {"c": {"machine": "B", "metrics": {"val/loss": [[0, 1.0], [10, 2.0 * (1 + FOREIGN_RTOL * 3)]]}}}
    same_machine_drift = {"c": {**drifted["c"], "machine": "A"}}
    assert differences(here, drifted) == []
    assert differences(here, same_machine_drift) != []  # exact on the recording machine
    [line] = differences(here, changed)
    assert line.startswith("c val/loss: first differs at step 10") and "another machine" in line


def test_a_chaotic_case_is_compared_over_its_first_steps_on_another_machine() -> None:
    case, (steps, _) = next(iter(FOREIGN_STEPS.items()))
    history = [[s, 1.0] for s in range(steps + 1)]
    late_departure = [[s, 1.0] for s in range(steps)] + [[steps, 1.5]]
    early_departure = [[0, 1.5]] + history[1:]
    here = {case: {"machine": "A", "metrics": {"train/loss": history}}}
    assert differences(here, {case: {"machine": "B", "metrics": {"train/loss": late_departure}}}) == []
    assert differences(here, {case: {"machine": "B", "metrics": {"train/loss": early_departure}}}) != []
    assert differences(here, {case: {"machine": "A", "metrics": {"train/loss": late_departure}}}) != []


def test_every_golden_case_names_the_machine_it_was_recorded_on() -> None:
    recorded = json.loads(DEFAULT_FILE.read_text())
    assert all(case.get("machine") for case in recorded.values())
    assert machine().split()[0] in {case["machine"].split()[0] for case in recorded.values()}  # same torch
