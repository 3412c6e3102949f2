"""Paired-seed statistics for ablations: the difference arm - reference, seed by seed.

Seeds pair runs: the same seed gives both arms the same data order and the same initial draw, so the
per-seed differences remove most of the seed-to-seed noise. Everything here works on the vector of
per-seed differences d_1..d_n:

- `paired_t`: the paired t-test (scipy's one-sample t-test of d against 0) and its Student-t interval: the
  interval every table prints (`ci_low`, `ci_high`, 95%) and the verdict rule decides on (at its level).
- `bootstrap_ci`: percentile bootstrap of mean(d), resampling seeds with replacement (fixed RNG seed, so a
  report is reproducible). Only an extra column, and only from BOOTSTRAP_MIN_SEEDS (10) seeds: below that
  it under-covers badly (at n = 3 the 95% interval is exactly [min d, max d]; ~75% coverage on normal data).
- `tost_p`: the two one-sided tests of |mean(d)| < margin (equivalence), and `mdd` / `seeds_needed`: the
  power of a paired t-test at a given level.
- `sign_flip_p`: the sign-flip permutation test of mean(d) = 0: under the null every d_i is as likely
  to be -d_i, so the p-value is the share of the 2^n sign patterns whose |mean| reaches the observed
  one. Exact (all 2^n patterns) for n <= EXACT_MAX_SEEDS, Monte Carlo above. Its smallest possible
  value is 2 / 2^n (0.25 with 3 seeds): a few seeds cannot make it small, which is the honest answer.
- `seed_noise`: two numbers that are easy to confuse, so they carry distinct names everywhere: the
  reference arm's seed-to-seed standard deviation (*seed sd*) and the minimum detectable difference
  at n seeds (*MDD*, a power calculation; see the function).
- `holm_adjust`: Holm's step-down adjustment of a family of p-values (family-wise error control).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

from analysis.seeds import seed_key

EXACT_MAX_SEEDS = 16
N_BOOT = 10_000
BOOTSTRAP_MIN_SEEDS = 10
LEVEL = 0.95
POWER = 0.8


@dataclass(frozen=True)
class PairedComparison:
    """Arm vs reference on one metric, paired by seed; differences are arm - reference."""

    n: int
    seeds: tuple[str, ...]
    mean_arm: float
    mean_ref: float
    mean_diff: float
    sd_diff: float
    ci_low: float  # the 95% paired Student-t interval of the mean difference
    ci_high: float
    boot_low: float  # percentile bootstrap (95%), only from BOOTSTRAP_MIN_SEEDS seeds (NaN below)
    boot_high: float
    p_t: float  # paired t-test, two-sided
    p_sign_flip: float  # sign-flip permutation test, two-sided
    exact: bool  # whether p_sign_flip enumerated every sign pattern

    @property
    def t_low(self) -> float:
        return self.ci_low

    @property
    def t_high(self) -> float:
        return self.ci_high

    @property
    def relative_diff(self) -> float:
        return self.mean_diff / abs(self.mean_ref) if self.mean_ref else float("nan")

    def ci_excludes_zero(self) -> bool:
        return bool(self.ci_low > 0 or self.ci_high < 0)

    def t_interval(self, level: float = LEVEL) -> tuple[float, float]:
        """The paired t-interval of the mean difference at `level` (e.g. 1 - alpha/m for m tests)."""
        return t_interval(self.n, self.mean_diff, self.sd_diff, level)



def bootstrap_ci(diffs: np.ndarray, n_boot: int = N_BOOT, level: float = LEVEL, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of `diffs` (NaN if empty)."""
    diffs = np.asarray(diffs, dtype=float)
    n = diffs.size
    if n == 0:
        return float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = diffs[rng.integers(0, n, size=(n_boot, n))].mean(axis=1)
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return float(low), float(high)


def paired_t(diffs: np.ndarray, level: float = LEVEL) -> tuple[float, float, float]:
    """(p-value, t-interval low, high) of mean(diffs) = 0; NaNs with fewer than 2 differences."""
    diffs = np.asarray(diffs, dtype=float)
    n = diffs.size
    if n < 2:
        return float("nan"), float("nan"), float("nan")
    mean, sd = float(diffs.mean()), float(diffs.std(ddof=1))
    low, high = t_interval(n, mean, sd, level)
    if sd == 0.0:
        # All differences equal: no spread to test against; zero difference is no evidence, any other is.
        return (1.0 if mean == 0.0 else 0.0), low, high
    return float(scipy_stats.ttest_1samp(diffs, 0.0).pvalue), low, high


def t_interval(n: int, mean: float, sd: float, level: float = LEVEL) -> tuple[float, float]:
    """Student-t interval of a mean from n values with sample sd; NaNs below 2 values."""
    if n < 2 or not (math.isfinite(mean) and math.isfinite(sd)):
        return float("nan"), float("nan")
    if sd == 0.0:
        return mean, mean
    half = float(scipy_stats.t.ppf(0.5 + level / 2.0, n - 1)) * sd / math.sqrt(n)
    return mean - half, mean + half


def holm_adjust(p_values) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order; NaNs stay NaN and do not count in m.

    With the m finite p-values sorted ascending, p_(1) <= ... <= p_(m), the adjusted value of the i-th is
    max over j <= i of min(1, (m - j + 1) p_(j)): monotone in p and capped at 1. Rejecting where the
    adjusted p < alpha controls the family-wise error rate at alpha (Holm 1979) under any dependence.
    """
    p = np.asarray(list(p_values), dtype=float)
    adjusted = np.full(p.shape, np.nan)
    finite = np.flatnonzero(np.isfinite(p))
    m = finite.size
    running = 0.0
    for rank, i in enumerate(finite[np.argsort(p[finite], kind="stable")]):
        running = max(running, min(1.0, (m - rank) * float(p[i])))
        adjusted[i] = running
    return [float(x) for x in adjusted]


def sign_flip_p(diffs: np.ndarray, n_random: int = 100_000, seed: int = 0) -> tuple[float, bool]:
    """(two-sided p-value, exact?) of the sign-flip permutation test of mean(diffs) = 0."""
    diffs = np.asarray(diffs, dtype=float)
    n = diffs.size
    if n == 0:
        return float("nan"), True
    observed = abs(diffs.mean())
    tolerance = 1e-12 * max(1.0, float(np.abs(diffs).max()))  # count float ties as reaching it
    if n <= EXACT_MAX_SEEDS:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=n)))
        means = np.abs(signs @ diffs) / n
        return float(np.mean(means >= observed - tolerance)), True
    rng = np.random.default_rng(seed)
    signs = rng.choice((1.0, -1.0), size=(n_random, n))
    means = np.abs(signs @ diffs) / n
    # +1 in both counts: the observed pattern is one of the permutations (a valid Monte Carlo p-value).
    return float((np.sum(means >= observed - tolerance) + 1) / (n_random + 1)), False


NOISE = 1e-12  # relative: a difference this small against the values it comes from is floating-point rounding


def without_rounding_noise(diffs: np.ndarray, scale: float) -> np.ndarray:
    """`diffs` with every value within NOISE x `scale` of 0 set to exactly 0: an accuracy averaged over tasks in
    two orders differs by ~1e-17, which is no effect and must not be printed as one."""
    diffs = np.asarray(diffs, dtype=float).copy()
    diffs[np.abs(diffs) <= NOISE * max(scale, 1e-300)] = 0.0
    return diffs


def compare_paired(arm: dict[str, float], ref: dict[str, float], seed: int = 0) -> PairedComparison:
    """Arm vs reference, each a {seed: value} map; only seeds present (and finite) in both are paired."""
    seeds = tuple(sorted(
        (s for s in arm if s in ref and np.isfinite(arm[s]) and np.isfinite(ref[s])), key=seed_key
    ))
    a = np.array([arm[s] for s in seeds], dtype=float)
    r = np.array([ref[s] for s in seeds], dtype=float)
    d = without_rounding_noise(a - r, max(1.0, *np.abs(a), *np.abs(r)) if a.size else 1.0)
    n = d.size
    boot_low, boot_high = bootstrap_ci(d, seed=seed) if n >= BOOTSTRAP_MIN_SEEDS else (float("nan"), float("nan"))
    p_t, t_low, t_high = paired_t(d)
    p_flip, exact = sign_flip_p(d, seed=seed)
    nan = float("nan")
    return PairedComparison(
        n=n,
        seeds=seeds,
        mean_arm=float(a.mean()) if n else nan,
        mean_ref=float(r.mean()) if n else nan,
        mean_diff=float(without_rounding_noise(np.array([d.mean()]), float(np.abs(d).max()))[0]) if n else nan,
        sd_diff=float(d.std(ddof=1)) if n > 1 else nan,
        ci_low=t_low,
        ci_high=t_high,
        boot_low=boot_low,
        boot_high=boot_high,
        p_t=p_t,
        p_sign_flip=p_flip,
        exact=exact,
    )


@dataclass(frozen=True)
class SeedNoise:
    """Seed-to-seed noise of the reference arm on one metric."""

    n: int
    sd: float  # the *seed sd*: standard deviation across seeds (ddof=1)
    mdd: float  # the *MDD*: smallest paired mean difference n seeds detect (see seed_noise)


def seed_noise(values: list[float] | np.ndarray, level: float = LEVEL, power: float = POWER) -> SeedNoise:
    """The seed sd of the reference's values, and the minimum detectable difference (MDD).

    The MDD is the usual paired-t power formula,
        (t_{1-alpha/2, n-1} + t_{power, n-1}) x sd_d / sqrt(n),
    with sd_d, the spread of per-seed differences, approximated by sqrt(2) x sd (two independent draws
    of the same noise). Pairing usually makes sd_d smaller than that, so this is a conservative bound
    measured from the baseline alone, before any arm is looked at.
    """
    values = np.asarray(values, dtype=float)
    values = values[np.isfinite(values)]
    n = values.size
    if n < 2:
        return SeedNoise(n, float("nan"), float("nan"))
    sd = float(values.std(ddof=1))
    quantiles = scipy_stats.t.ppf(0.5 + level / 2.0, n - 1) + scipy_stats.t.ppf(power, n - 1)
    return SeedNoise(n, sd, float(quantiles * math.sqrt(2.0) * sd / math.sqrt(n)))


def tost_p(n: int, mean: float, sd: float, margin: float) -> float:
    """p of the two one-sided t-tests of H0: |true mean| >= margin (equivalence when small).

    Equivalence at level a (p < a) holds exactly when the (1 - 2a) t interval lies inside [-margin, margin]."""
    if n < 2 or not (math.isfinite(mean) and math.isfinite(sd)) or not margin > 0:
        return float("nan")
    if sd == 0.0:
        return 0.0 if abs(mean) < margin else 1.0
    se = sd / math.sqrt(n)
    p_low = float(scipy_stats.t.sf((mean + margin) / se, n - 1))  # H0: mean <= -margin
    p_high = float(scipy_stats.t.cdf((mean - margin) / se, n - 1))  # H0: mean >= +margin
    return max(p_low, p_high)


def mdd(n: int, sd_diff: float, alpha: float = 1 - LEVEL, power: float = POWER) -> float:
    """Minimum detectable paired difference: (t_{1-alpha/2, n-1} + t_{power, n-1}) sd(d) / sqrt(n)."""
    if n < 2 or not math.isfinite(sd_diff):
        return float("nan")
    q = scipy_stats.t.ppf(1 - alpha / 2, n - 1) + scipy_stats.t.ppf(power, n - 1)
    return float(q * sd_diff / math.sqrt(n))


SEEDS_NEEDED_CAP = 1000


def seeds_needed(sd_diff: float, delta: float, alpha: float = 1 - LEVEL, power: float = POWER) -> float:
    """Smallest n with mdd(n) <= |delta| (sd(d) from the pilot seeds); inf beyond SEEDS_NEEDED_CAP."""
    if not (math.isfinite(sd_diff) and math.isfinite(delta)) or delta == 0:
        return float("nan")
    if sd_diff == 0:
        return 2.0
    for n in range(2, SEEDS_NEEDED_CAP + 1):
        if mdd(n, sd_diff, alpha, power) <= abs(delta):
            return float(n)
    return math.inf


def holm_divisors(p_values, alpha: float = 1 - LEVEL) -> list[float]:
    """Per test, the k of the level alpha / k at which Holm's step-down judged it (NaN p: NaN).

    With the m finite p-values sorted ascending, the test of rank r (1-based) is judged at alpha / (m - r + 1)
    while every earlier test was rejected; at the first test it cannot reject Holm stops, and that test and
    every later one keep the divisor of the stop. So a test's Holm-adjusted p (`holm_adjust`) is below alpha
    exactly when its own p is below alpha / k, i.e. when its t interval at level 1 - alpha / k excludes 0:
    the interval printed at that level is the interval the decision was made on.
    """
    p = np.asarray(list(p_values), dtype=float)
    divisors = np.full(p.shape, np.nan)
    finite = np.flatnonzero(np.isfinite(p))
    m = finite.size
    stopped: float | None = None
    for rank, i in enumerate(finite[np.argsort(p[finite], kind="stable")]):
        k = float(m - rank)
        if stopped is None and not p[i] < alpha / k:
            stopped = k
        divisors[i] = k if stopped is None else stopped
    return [float(x) for x in divisors]
