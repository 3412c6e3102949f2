"""How an effect moves with model size: a weighted line through the per-rung effects against ln N.

    trend = fit_trend(n_params=[26_784, 90_192, 213_568, 720_096], effects=[-0.01, -0.02, -0.03, -0.04],
                      ses=[0.002, 0.002, 0.002, 0.002], claimed=-1)     # the ladder's l2, l3, l4, l6
    trend.statement        # 'grows with scale'

One point per rung (a model size: the base arm and its `@x<factor>` variants, N the reference's logged
non-embedding parameters; or a ladder rung `@l<depth>`, N the ladder's declared count; analysis/rungs.py): the
mean paired difference arm - reference at that rung and its standard error SE = sd(d) / sqrt(n). The line is
fitted by weighted least squares on x = ln N with weights 1 / SE^2, from 3 rungs up (two always fit a line).
The slope's 95% interval is a t interval on k - 2 degrees of freedom (k rungs), SE(slope)^2 =
1 / sum w (x - mean_w x)^2 with the rungs' SEs taken as known, inflated by sqrt(Q / (k - 2)) where the rungs
scatter about the line more than their SEs allow (Q = sum w r^2, the residual chi-square; Birge's ratio). With
k = 3 the t on 1 degree of freedom is 12.7, so three rungs show a trend only when their SEs are small against
it; SEs from 3-8 seeds are themselves uncertain, which the report says next to the interval.

The statement reads the fitted line over the measured range (smallest to largest N):
- "no detectable trend with scale": the slope's interval holds 0;
- "grows with scale" / "shrinks with scale": the interval excludes 0 and |effect| rises / falls with N
  along the line, which keeps one sign over the range;
- "changes sign with scale": the interval excludes 0 and the line crosses 0 within the range;
- "not estimable from two rungs": two points always fit a line; no trend is claimed from them;
- "not estimable: no rung has a finite effect" (e.g. a speed-up where the arm never reaches the reference's
  loss at any size) and "not estimable from one rung".
`direction` says where the line ends at the largest N against the paper's claimed sign (-1: lower is the
claim, as for a loss the arm should lower; +1: higher; 0: the paper claims no effect).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from scipy import stats as scipy_stats

LEVEL = 0.95
INTERVAL_TEXT = ("95% t interval on k - 2 degrees of freedom (k rungs), SE(slope) inflated by sqrt(Q / (k - 2)) "
                 "when the rungs scatter about the line more than their SEs allow")
POOLED_TEXT = ("random-effects mean over the rungs (DerSimonian-Laird), 95% t interval on k - 1 degrees of "
               "freedom")
NOT_FROM_TWO = "not estimable from two rungs"
NOT_FROM_ONE, NO_FINITE_RUNG = "not estimable from one rung", "not estimable: no rung has a finite effect"
NO_TREND = "no detectable trend with scale"
GROWS, SHRINKS, CHANGES_SIGN = "grows with scale", "shrinks with scale", "changes sign with scale"


@dataclass(frozen=True)
class Trend:
    slope: float  # effect per unit of ln N
    low: float
    high: float
    rungs: int  # rungs with a measured effect and SE
    statement: str
    direction: str = ""
    inflation: float = 1.0  # the factor the slope's SE was widened by (1: the rungs sit within their SEs)
    line: "Line | None" = None  # the fit itself, for predictions at other sizes


@dataclass(frozen=True)
class Line:
    """A weighted fit of effect on x = ln N: enough to predict at another N with the fit's own uncertainty."""

    x_bar: float
    y_bar: float
    slope: float
    sum_w: float
    sxx: float
    scale2: float  # the Birge factor squared (>= 1): residual scatter beyond the rungs' SEs
    dof: int

    def predict(self, n_params: float, own_se: float = 0.0, level: float = LEVEL) -> tuple[float, float, float]:
        """(prediction, low, high) at `n_params`; `own_se`: that size's own measurement error, when it is one."""
        x = math.log(n_params)
        y = self.y_bar + self.slope * (x - self.x_bar)
        var = self.scale2 * (1.0 / self.sum_w + (x - self.x_bar) ** 2 / self.sxx) + own_se ** 2
        half = _t(level, self.dof) * math.sqrt(var)
        return y, y - half, y + half


@dataclass(frozen=True)
class Pooled:
    effect: float
    low: float
    high: float
    tau2: float
    rungs: int


def _t(level: float, dof: int) -> float:
    return float(scipy_stats.t.ppf(0.5 + level / 2.0, dof))


def _points(n_params, effects, ses) -> list[tuple[float, float, float]]:
    return [(math.log(n), e, s) for n, e, s in zip(n_params, effects, ses)
            if n > 0 and math.isfinite(n) and math.isfinite(e) and math.isfinite(s) and s > 0]


def pooled_effect(n_params: list[float], effects: list[float], ses: list[float]) -> Pooled:
    """DerSimonian-Laird random-effects mean of the rungs' effects; NaNs below two usable rungs."""
    points = _points(n_params, effects, ses)
    k = len(points)
    if k < 2:
        return Pooled(math.nan, math.nan, math.nan, math.nan, k)
    y, se = np.array([p[1] for p in points]), np.array([p[2] for p in points])
    w = 1.0 / se**2
    fixed = float(np.sum(w * y) / np.sum(w))
    q = float(np.sum(w * (y - fixed) ** 2))
    tau2 = max(0.0, (q - (k - 1)) / float(np.sum(w) - np.sum(w**2) / np.sum(w)))
    w_star = 1.0 / (se**2 + tau2)
    mean = float(np.sum(w_star * y) / np.sum(w_star))
    half = _t(LEVEL, k - 1) * math.sqrt(1.0 / float(np.sum(w_star)))
    return Pooled(mean, mean - half, mean + half, tau2, k)


def fit_trend(n_params: list[float], effects: list[float], ses: list[float], claimed: int = 0) -> Trend:
    """The weighted line of `effects` (SE `ses`) against ln `n_params`; points without a finite positive SE
    or N are left out before fitting."""
    points = _points(n_params, effects, ses)
    k = len(points)
    if k < 3:
        reason = {2: NOT_FROM_TWO, 1: NOT_FROM_ONE, 0: NO_FINITE_RUNG}[k]
        return Trend(math.nan, math.nan, math.nan, k, reason)
    x, y, se = (np.array(col, dtype=float) for col in zip(*points))
    w = 1.0 / se**2
    x_bar, y_bar = np.average(x, weights=w), np.average(y, weights=w)
    sxx = float(np.sum(w * (x - x_bar) ** 2))
    if sxx <= 0:
        return Trend(math.nan, math.nan, math.nan, k, "not estimable: the rungs have one size")
    slope = float(np.sum(w * (x - x_bar) * (y - y_bar)) / sxx)
    q = float(np.sum(w * (y - y_bar - slope * (x - x_bar)) ** 2))
    inflation = max(1.0, math.sqrt(q / (k - 2)))
    half = _t(LEVEL, k - 2) * inflation / math.sqrt(sxx)
    low, high = slope - half, slope + half
    at_small, at_large = (float(y_bar + slope * (v - x_bar)) for v in (x.min(), x.max()))
    if low <= 0 <= high:
        statement = NO_TREND
    elif at_small * at_large < 0:
        statement = CHANGES_SIGN
    else:
        statement = GROWS if abs(at_large) > abs(at_small) else SHRINKS
    line = Line(float(x_bar), float(y_bar), slope, float(np.sum(w)), sxx, inflation**2, k - 2)
    return Trend(slope, low, high, k, statement, _direction(at_large, claimed), inflation, line)


def _direction(at_large: float, claimed: int) -> str:
    if claimed == 0:
        return "the paper claims no effect"
    # The line's value, not the largest rung's measured effect (the two can differ in sign): say which.
    if at_large == 0:
        return "fitted line zero at the largest rung"
    same = (at_large < 0) == (claimed < 0)
    return f"fitted line {'in' if same else 'against'} the claimed direction at the largest rung"
