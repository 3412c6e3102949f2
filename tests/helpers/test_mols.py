"""The MoLS test helpers compare state exactly."""

import torch

from tests.helpers.mols import same


def test_same_is_exact_and_recursive():
    a = {"x": [torch.ones(2), 1.0], "y": None}
    assert same(a, {"x": [torch.ones(2), 1.0], "y": None})
    assert not same(a, {"x": [torch.ones(2) + 1e-7, 1.0], "y": None})
    assert not same(a, {"x": [torch.ones(2)], "y": None})
