"""PC layer polynomials: the published table, p(1) = 1, conditioning per level, the matrix form."""

import itertools

import pytest
import torch

from lit_modules.techniques.pc_layer.polynomials import (
    PC_COEFFICIENTS,
    coefficients,
    condition_number_after,
    fit_odd_polynomial,
    max_on_unit_interval,
    odd_matrix_polynomial,
    odd_polynomial,
)

# Hard-coded here a second time on purpose: a typo in the table must fail a test.
PUBLISHED = {
    1: (1.507, -0.507),
    2: (2.083, -1.643, 0.560),
    3: (2.909, -4.649, 4.023, -1.283),
    4: (3.625, -9.261, 14.097, -10.351, 2.890),
}


def test_table_is_the_published_one():
    assert set(PC_COEFFICIENTS) == {0, 1, 2, 3, 4}
    assert PC_COEFFICIENTS[0] == (1.0,)
    for level, coeffs in PUBLISHED.items():
        assert PC_COEFFICIENTS[level] == coeffs
        assert len(coeffs) == level + 1  # degree 2k + 1


@pytest.mark.parametrize("level", range(5))
def test_p_of_one_is_one(level):
    assert sum(coefficients(level)) == pytest.approx(1.0, abs=1e-12)
    one = torch.tensor([1.0], dtype=torch.float64)
    assert odd_polynomial(one, level).item() == pytest.approx(1.0, abs=1e-12)


def test_odd_polynomial_values():
    s = torch.tensor([0.3, -0.3], dtype=torch.float64)
    p = odd_polynomial(s, 2)
    expected = 2.083 * 0.3 - 1.643 * 0.3**3 + 0.560 * 0.3**5
    assert p[0].item() == pytest.approx(expected, rel=1e-12)
    assert p[1].item() == pytest.approx(-expected, rel=1e-12)  # odd


@pytest.mark.parametrize(
    "level,peak,at", [(1, 1.000, None), (2, 1.010, 0.84), (3, 1.019, 0.62), (4, 1.020, 0.51)]
)
def test_overshoot_matches_papers_table(level, peak, at):
    value, where = max_on_unit_interval(level)
    assert value == pytest.approx(peak, abs=6e-4)
    if at is not None:
        assert where == pytest.approx(at, abs=0.006)


def test_condition_number_drops_level_by_level():
    # papers.md [DERIVED]: spectrum [0.05, 1] (kappa 20) -> 13.3 / 9.7 / 7.0 / 5.7 for k = 1..4.
    kappas = [condition_number_after(0.05, level) for level in range(5)]
    assert kappas[0] == pytest.approx(20.0)
    assert [round(k, 1) for k in kappas[1:]] == [13.3, 9.7, 7.0, 5.7]
    assert all(a > b for a, b in itertools.pairwise(kappas))


def _matrix_with_spectrum(s: torch.Tensor, rows: int, cols: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    u, _ = torch.linalg.qr(torch.randn(rows, len(s), generator=g, dtype=torch.float64))
    v, _ = torch.linalg.qr(torch.randn(cols, len(s), generator=g, dtype=torch.float64))
    return u @ torch.diag(s) @ v.T


@pytest.mark.parametrize("shape", [(48, 24), (24, 48), (24, 24)])  # tall, wide, square
@pytest.mark.parametrize("level", range(5))
def test_matrix_polynomial_maps_each_singular_value(shape, level):
    s = torch.linspace(1.0, 0.05, 24, dtype=torch.float64)
    w = _matrix_with_spectrum(s, *shape)
    out = odd_matrix_polynomial(w, level)
    got = torch.linalg.svdvals(out)
    want = torch.sort(odd_polynomial(s, level).abs(), descending=True).values
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
    # Same as the explicit sum c_j W (W^T W)^j whichever side the Gram is formed on.
    gram = w.T @ w
    explicit = sum(c * w @ torch.linalg.matrix_power(gram, j) for j, c in enumerate(coefficients(level)))
    torch.testing.assert_close(out, explicit, rtol=1e-10, atol=1e-12)


def test_matrix_condition_number_per_level_on_synthetic_spectrum():
    s = torch.linspace(1.0, 0.05, 200, dtype=torch.float64)
    w = _matrix_with_spectrum(s, 256, 200)
    kappas = []
    for level in range(5):
        sv = torch.linalg.svdvals(odd_matrix_polynomial(w, level))
        kappas.append((sv[0] / sv[-1]).item())
    assert [round(k, 1) for k in kappas] == [20.0, 13.3, 9.7, 7.0, 5.7]


def test_unknown_level_is_rejected():
    with pytest.raises(ValueError, match="PC level"):
        coefficients(5)


def test_naive_refit_does_not_reproduce_the_table():
    """Documents the discrepancy papers.md reports: simple weighted LS fits are near, not equal."""
    cutoffs = {1: 0.75, 2: 0.55, 3: 0.405, 4: 0.34}
    worst_per_level = {}
    for level, b in cutoffs.items():
        gaps = []
        for weight in ("uniform", "s", "chebyshev"):
            fitted = fit_odd_polynomial(2 * level + 1, b, weight)
            assert sum(fitted) == pytest.approx(1.0, abs=1e-9)  # p(1) = 1 was imposed
            gaps.append(max(abs(a - c) for a, c in zip(fitted, PUBLISHED[level])))
        worst_per_level[level] = min(gaps)  # the best of the simple weightings
    # Level 1 with p(1) = 1 and a uniform weight is within rounding of the table (papers.md: "exact")...
    assert worst_per_level[1] < 2e-3
    # ...but for the higher levels no simple weighting reproduces the published coefficients.
    assert all(worst_per_level[level] > 0.02 for level in (2, 3, 4))


def test_refit_rejects_even_degree():
    with pytest.raises(ValueError):
        fit_odd_polynomial(4, 0.5)
