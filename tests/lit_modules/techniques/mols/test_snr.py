"""MoLS numbers against known answers: SNR estimators, alpha and its clipping, the ramp shapes,
and a measurement that leaves .grad and the RNG untouched."""

import math

import pytest
import torch
from torch import nn

from lit_modules.techniques.mols.scaling import alpha_from_snr, ramp
from lit_modules.techniques.mols.snr import GradientMoments, group_snr, measure_gradient_moments


def exact_samples(mu: torch.Tensor, sigma: torch.Tensor, k: int) -> list[torch.Tensor]:
    """g_j = mu + sigma * z_j with z = +1, -1, +1, ...: sample mean exactly mu, population variance
    exactly sigma^2."""
    assert k % 2 == 0
    return [mu + sigma * (1.0 if j % 2 == 0 else -1.0) for j in range(k)]


def moments_of(samples_per_param: list[list[torch.Tensor]]) -> GradientMoments:
    m = GradientMoments.like([s[0] for s in samples_per_param])
    for j in range(len(samples_per_param[0])):
        m.update([s[j] for s in samples_per_param])
    return m


MU_A, SIG_A = torch.tensor([[1.0, -2.0], [0.5, 3.0]]), torch.tensor([[1.0, 1.0], [0.5, 2.0]])
MU_B, SIG_B = torch.tensor([0.1, 0.2, -0.3]), torch.tensor([1.0, 0.4, 0.3])
K = 8


@pytest.fixture
def two_tensor_group() -> GradientMoments:
    return moments_of([exact_samples(MU_A, SIG_A, K), exact_samples(MU_B, SIG_B, K)])


def test_moments_are_exact_sample_mean_and_variance(two_tensor_group):
    m = two_tensor_group
    assert m.count == K
    torch.testing.assert_close(m.mean[0], MU_A)
    torch.testing.assert_close(m.m2[0] / K, SIG_A**2)


def test_per_coord_snr_is_mean_of_coordinate_ratios(two_tensor_group):
    ratios = torch.cat([(MU_A**2 / SIG_A**2).flatten(), MU_B**2 / SIG_B**2])
    assert group_snr(two_tensor_group, "per_coord", eps=1e-12) == pytest.approx(
        float(ratios.mean()), rel=1e-5
    )


def test_per_coord_eps_is_relative_to_the_mean_variance(two_tensor_group):
    var = torch.cat([(SIG_A**2).flatten(), SIG_B**2])
    mu2 = torch.cat([(MU_A**2).flatten(), MU_B**2])
    expected = float((mu2 / (var + 0.1 * var.mean())).mean())
    assert group_snr(two_tensor_group, "per_coord", eps=0.1) == pytest.approx(expected, rel=1e-5)


def test_snr_does_not_depend_on_the_gradient_scale():
    m1 = moments_of([exact_samples(MU_A, SIG_A, K)])
    m2 = moments_of([exact_samples(MU_A * 1e-6, SIG_A * 1e-6, K)])
    for estimator in ("per_coord", "aggregate"):
        assert group_snr(m1, estimator) == pytest.approx(group_snr(m2, estimator), rel=1e-4)


def test_one_repeated_coordinate_cannot_dominate_the_group():
    """bf16 gradients can repeat exactly across samples (var = 0); the relative floor bounds its weight."""
    n = 10_000
    mu, sigma = torch.full((n,), 1e-4), torch.full((n,), 1e-4)
    sigma[0] = 0.0  # one coordinate with identical values in every sample
    m = moments_of([exact_samples(mu, sigma, K)])
    assert group_snr(m, "per_coord") < 1.2  # true mean of ratios: 1 for all but one coordinate


def test_aggregate_snr_is_ratio_of_sums(two_tensor_group):
    expected = float(((MU_A**2).sum() + (MU_B**2).sum()) / ((SIG_A**2).sum() + (SIG_B**2).sum()))
    assert group_snr(two_tensor_group, "aggregate", eps=1e-12) == pytest.approx(expected, rel=1e-5)


def test_debiased_estimators_use_unbiased_variance_and_subtract_var_over_k(two_tensor_group):
    var_u = lambda s: s**2 * K / (K - 1)
    sig_mu = lambda mu, s: (mu**2 - var_u(s) / K).clamp_min(0)
    ratios = torch.cat([(sig_mu(MU_A, SIG_A) / var_u(SIG_A)).flatten(), sig_mu(MU_B, SIG_B) / var_u(SIG_B)])
    got = group_snr(two_tensor_group, "per_coord", eps=1e-12, debias=True)
    assert got == pytest.approx(float(ratios.mean()), rel=1e-5)
    num = (MU_A**2).sum() + (MU_B**2).sum() - ((var_u(SIG_A)).sum() + var_u(SIG_B).sum()) / K
    den = var_u(SIG_A).sum() + var_u(SIG_B).sum()
    got = group_snr(two_tensor_group, "aggregate", eps=1e-12, debias=True)
    assert got == pytest.approx(float(num / den), rel=1e-5)


@pytest.mark.parametrize("debias", [False, True])
def test_estimators_converge_to_true_snr_with_many_random_samples(debias):
    gen = torch.Generator().manual_seed(0)
    mu = torch.linspace(-1.0, 1.0, 40)
    sigma = torch.linspace(0.5, 2.0, 40)
    m = GradientMoments.like([mu])
    for _ in range(20000):
        m.update([mu + sigma * torch.randn(40, generator=gen)])
    true_per_coord = float((mu**2 / sigma**2).mean())
    true_aggregate = float((mu**2).sum() / (sigma**2).sum())
    assert group_snr(m, "per_coord", debias=debias) == pytest.approx(true_per_coord, rel=0.03)
    assert group_snr(m, "aggregate", debias=debias) == pytest.approx(true_aggregate, rel=0.03)


def test_plain_estimator_floors_near_one_over_k_for_pure_noise_and_debias_removes_it():
    """The documented bias. With mu = 0: K mu_hat^2 ~ chi2(1) and K var_pop ~ chi2(K-1), independent, so
    per coordinate E[mu_hat^2 / var_pop] = 1/(K-3) and the ratio of sums tends to 1/(K-1); debiased, ~0."""
    gen = torch.Generator().manual_seed(1)
    k, n = 8, 200_000
    m = GradientMoments.like([torch.zeros(n)])
    for _ in range(k):
        m.update([torch.randn(n, generator=gen)])
    assert group_snr(m, "per_coord") == pytest.approx(1 / (k - 3), rel=0.05)
    assert group_snr(m, "aggregate") == pytest.approx(1 / (k - 1), rel=0.05)
    assert group_snr(m, "aggregate", debias=True) == pytest.approx(0.0, abs=0.01)


def test_dead_coordinates_are_left_out_or_counted_as_zero():
    mu, sigma = torch.tensor([2.0, 0.0]), torch.tensor([1.0, 0.0])  # second coordinate: always exactly 0
    m = moments_of([exact_samples(mu, sigma, 4)])
    assert group_snr(m, "per_coord", eps=1e-12, ignore_dead_coords=True) == pytest.approx(4.0, rel=1e-6)
    assert group_snr(m, "per_coord", eps=1e-12, ignore_dead_coords=False) == pytest.approx(2.0, rel=1e-6)


def test_degenerate_groups_are_finite_or_nan_never_a_crash():
    constant = moments_of([[torch.tensor([1.0, 1.0])] * 4])  # zero variance, nonzero mean
    assert math.isfinite(group_snr(constant, "per_coord")) and group_snr(constant, "per_coord") > 1e20
    dead = moments_of([[torch.zeros(3)] * 4])
    assert math.isnan(group_snr(dead, "per_coord")) and math.isnan(group_snr(dead, "aggregate"))
    with pytest.raises(ValueError):
        group_snr(moments_of([[torch.ones(2)]]), "per_coord")


def test_welford_keeps_variance_when_the_mean_dominates():
    mu, sigma = torch.full((4,), 1000.0), torch.full((4,), 1e-2)  # fp32 E[g^2]-mu^2 would lose this
    m = moments_of([exact_samples(mu, sigma, 8)])
    torch.testing.assert_close(m.m2[0] / 8, sigma**2, rtol=1e-2, atol=0)


# --------------------------------------------------------------------- alpha


def test_alpha_is_sqrt_of_snr_ratio():
    assert alpha_from_snr(snr=2.0, base_snr=8.0) == pytest.approx(2.0)
    assert alpha_from_snr(snr=8.0, base_snr=2.0) == pytest.approx(0.5)
    assert alpha_from_snr(snr=3.0, base_snr=3.0) == 1.0


def test_alpha_clipping():
    assert alpha_from_snr(1.0, 100.0, clip_min=0.5, clip_max=4.0) == 4.0  # raw 10
    assert alpha_from_snr(100.0, 1.0, clip_min=0.5, clip_max=4.0) == 0.5  # raw 0.1
    assert alpha_from_snr(4.0, 9.0, clip_min=0.5, clip_max=4.0) == pytest.approx(1.5)  # inside
    assert alpha_from_snr(100.0, 1.0, clip_max=4.0) == pytest.approx(0.1)  # one-sided


@pytest.mark.parametrize("snr,base", [(0.0, 1.0), (1.0, 0.0), (float("nan"), 1.0), (1.0, float("inf"))])
def test_alpha_falls_back_to_one_on_degenerate_snr(snr, base):
    assert alpha_from_snr(snr, base) == 1.0


# --------------------------------------------------------------------- ramp


def test_linear_ramp():
    assert ramp(0, 10, 30, 3.0, "linear") == 1.0
    assert ramp(10, 10, 30, 3.0, "linear") == 1.0
    assert ramp(15, 10, 30, 3.0, "linear") == pytest.approx(1.5)
    assert ramp(20, 10, 30, 3.0, "linear") == pytest.approx(2.0)
    assert ramp(30, 10, 30, 3.0, "linear") == 3.0
    assert ramp(1000, 10, 30, 3.0, "linear") == 3.0
    assert ramp(20, 10, 30, 0.5, "linear") == pytest.approx(0.75)  # ramps down as well


def test_cosine_ramp():
    assert ramp(10, 10, 30, 3.0, "cosine") == 1.0
    assert ramp(15, 10, 30, 3.0, "cosine") == pytest.approx(1.0 + 2.0 * (1 - math.cos(math.pi / 4)) / 2)
    assert ramp(20, 10, 30, 3.0, "cosine") == pytest.approx(2.0)  # midpoint as linear
    assert ramp(25, 10, 30, 3.0, "cosine") == pytest.approx(1.0 + 2.0 * (1 - math.cos(3 * math.pi / 4)) / 2)
    assert ramp(30, 10, 30, 3.0, "cosine") == 3.0


def test_step_ramp_jumps_at_the_estimate():
    assert ramp(9, 10, 30, 3.0, "step") == 1.0
    assert ramp(10, 10, 30, 3.0, "step") == 3.0
    assert ramp(29, 10, 30, 3.0, "step") == 3.0


def test_unknown_ramp_shape_raises():
    with pytest.raises(ValueError):
        ramp(0, 0, 1, 2.0, "exp")


# --------------------------------------------------------------------- measurement leaves no trace


def test_measurement_recovers_known_gradients_and_leaves_grad_and_rng_untouched():
    w, frozen_partner = nn.Parameter(torch.ones(3)), nn.Parameter(torch.ones(2))
    sentinel = torch.tensor([7.0, 8.0, 9.0])
    w.grad = sentinel
    batches = exact_samples(torch.tensor([1.0, 0.0, -2.0]), torch.tensor([0.5, 1.0, 2.0]), 6)

    def loss_fn(g):
        torch.rand(5)  # a loss that draws random numbers must not shift the caller's RNG stream
        return (w * g).sum() + 0.0 * frozen_partner.sum()  # d loss / d w = g exactly

    torch.manual_seed(123)
    rng_before = torch.get_rng_state()
    moments = measure_gradient_moments(loss_fn, batches, {"a": [w], "b": [frozen_partner], "empty": []})
    assert torch.equal(torch.get_rng_state(), rng_before)
    assert w.grad is sentinel and torch.equal(sentinel, torch.tensor([7.0, 8.0, 9.0]))
    assert frozen_partner.grad is None
    assert "empty" not in moments and moments["a"].count == 6
    torch.testing.assert_close(moments["a"].mean[0], torch.tensor([1.0, 0.0, -2.0]))
    torch.testing.assert_close(moments["a"].m2[0] / 6, torch.tensor([0.25, 1.0, 4.0]))
    assert group_snr(moments["a"], "per_coord", eps=1e-12) == pytest.approx((4.0 + 0.0 + 1.0) / 3, rel=1e-5)
    assert math.isnan(group_snr(moments["b"], "per_coord"))  # its gradient is 0 in every sample
