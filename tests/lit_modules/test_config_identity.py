"""New config fields (LoRA, MoE, optimizers, sampled metrics) leave the identity hash of every existing preset
cell unchanged: a finished evidence cell is still recognized and skipped, never rerun under a new hash.
The hashes in tests/assets/preset_hashes.json were recorded on the code before those fields existed; the evidence
presets' cells were recorded again when their protocols moved onto the model ladder (every cell `<arm>@l<depth>`,
a deliberate change of every cell), so the guard keeps the cells those protocols run now."""

from __future__ import annotations

import json

import pytest

from tests.helpers.preset_hashes import PRESETS, arms, cell_hash, cell_overrides
from tests.helpers.runs import REPO

RECORDED = json.loads((REPO / "tests/assets/preset_hashes.json").read_text())


@pytest.mark.parametrize("preset", PRESETS)
def test_the_first_cell_of_every_existing_preset_keeps_its_config_hash(preset):
    arm = next(a for a in arms(preset) if f"{preset} {a}" in RECORDED)  # arms added later were not recorded
    assert cell_hash(cell_overrides(preset, arm)) == RECORDED[f"{preset} {arm}"]


@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(RECORDED))
def test_every_cell_of_every_existing_preset_keeps_its_config_hash(key):
    preset, arm = key.split(" ")
    assert cell_hash(cell_overrides(preset, arm)) == RECORDED[key]
