"""The rule that turns one (arm, check) comparison into a verdict a reader can re-derive from its row.

The claims (which checks, what each arm is expected to do) are data (analysis/claims.py); which checks are
primary is the protocol's declaration (analysis/families.py); the comparisons are analysis/verdict_table.py's.
This module decides, from the numbers the row prints and nothing else (shared/reference/statistics.md):

1. ONE INTERVAL. Every test works on the per-seed differences d = arm - reference (speedups: log ratios).
   The interval printed is the paired Student-t interval the verdict is decided on, at the row's level:
   - a *secondary* check (mechanism, context, grid points): 95%, raw p;
   - a *primary* check (the paper's claims, declared before the cells ran): Holm's step-down over the
     protocol's primary checks judged it at alpha / k (k in the row); its interval is printed at 1 - alpha/k,
     so "Holm p < alpha" and "the interval excludes 0" are the same statement (analysis.stats.holm_divisors).
   - a "none" expectation with a declared margin M is an equivalence test (TOST): the interval is at
     1 - 2 alpha / k and "no effect" means it lies inside [-M, +M].
2. NOT DECIDABLE FIRST. No measurement, fewer than MIN_SEEDS paired seeds, a metric at its chance floor
   (the reference's mean accuracy below chance + 2 binomial standard errors of the items scored: *not
   testable at this scale*, the chance level shown), a reference with the same value on every seed (the
   metric does not move: *not testable*), or a speedup an arm did not reach on some seed (*did not reach*,
   with its closest approach; never an interval). An arm equal to its reference on every seed
   has no t to compute and no difference to find: *no detectable effect*, said so.
3. DIRECTION. Interval excludes 0 on the claimed side: *reproduced* (primary) / *consistent with the paper*
   (secondary); on the other side: *opposite* / *consistent with the opposite*; contains 0: *no detectable
   effect at this power* (the row's MDD says what that power was). For "none": inside the margin:
   *reproduced* / *consistent with no effect*; entirely outside it: *not reproduced* / *consistent with an
   effect*; else *cannot tell at this power*.
4. MAGNITUDE against the paper's effect in our units (where the paper gives one), said only when the estimate
   lies on the paper's side of 0: the interval contains it (*consistent*), lies wholly nearer zero (*smaller*),
   or wholly beyond it (*larger*); an estimate on the other side of 0 is *opposite side*; no number in the
   paper: *no comparable figure in the paper* (never "cannot tell" beside a decided direction).
6. EXACT TEST BESIDE t. With n <= EXACT_NOTE_MAX_SEEDS seeds the row's reason says when the exact sign-flip p
   and the t interval disagree at the row's level (the smallest sign-flip p is 2 / 2^n: 0.0625 at 5 seeds).
   Fewer than MIN_SEEDS seeds: the row prints no p and no interval at all (analysis/verdict_table.py).
5. TUNED comparisons over different LR grids are not symmetric: *not comparable*.

Every verdict states the scale it holds at (analysis/scale.py). Arms are never ranked against each other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from analysis.scale import Scale
from analysis.stats import t_interval

MIN_SEEDS = 3
EXACT_NOTE_MAX_SEEDS = 10  # rows this small print the exact sign-flip p and say when it disagrees
ALPHA = 0.05
PRIMARY = "primary"
SECONDARY = "secondary"

REPRODUCED = "reproduced"
OPPOSITE = "opposite"
NO_DETECTABLE = "no detectable effect at this power"
NOT_REPRODUCED = "not reproduced"  # a "none" claim with an effect beyond its margin
CANNOT_TELL = "cannot tell at this power"  # a "none" claim whose interval crosses its margin
CONSISTENT = "consistent with the paper"
CONSISTENT_OPPOSITE = "consistent with the opposite"
CONSISTENT_NONE = "consistent with no effect"
CONSISTENT_EFFECT = "consistent with an effect"
NOT_TESTABLE = "not testable at this scale"
DID_NOT_REACH = "did not reach"
NOT_MEASURED = "not measured"
TOO_FEW_SEEDS = "too few seeds"
NOT_COMPARABLE = "not comparable"
NO_CLAIM = "no claim (context arm)"

MAG_CONSISTENT = "consistent"
MAG_SMALLER = "smaller"
MAG_LARGER = "larger"
MAG_UNKNOWN = "no comparable figure in the paper"
MAG_OPPOSITE_SIDE = "opposite side"
MAG_NONE = "-"

# The labels that state a direction the interval supports, by role: (claimed side, other side).
SUPPORTED = {PRIMARY: (REPRODUCED, OPPOSITE), SECONDARY: (CONSISTENT, CONSISTENT_OPPOSITE)}
EQUIVALENCE = {PRIMARY: (REPRODUCED, NOT_REPRODUCED), SECONDARY: (CONSISTENT_NONE, CONSISTENT_EFFECT)}

RULE_TEXT = (
    "Each row is decided on the interval it prints (paired Student-t over seeds, arm - reference; speedups "
    "as log ratios). Secondary checks (mechanism, context): 95% interval, raw p, words no stronger than "
    "'consistent with'. Primary checks (the paper's claims, declared in the protocol before the cells ran): "
    f"Holm over the primary family at alpha {ALPHA}; a test Holm judged at alpha/k prints its interval at "
    "1 - alpha/k, so 'Holm p < alpha' and 'interval excludes 0' are one statement. A 'none' claim with a "
    "declared margin M is a TOST: its interval (1 - 2 alpha/k) inside [-M, M] is 'no effect'. Before any "
    f"direction: fewer than {MIN_SEEDS} paired seeds, a metric at its chance floor (reference mean below chance "
    "+ 2 binomial standard errors) or a reference with one value on every seed (both: not testable at this "
    "scale), or a speedup not reached on some seed (did not "
    "reach, with the closest approach; never an interval). Direction: the interval wholly on the claimed side "
    "(reproduced), wholly on the other (opposite), or containing 0 (no detectable effect at this power; the "
    "MDD column is that power). Magnitude against the paper's effect in our units, only for an estimate on the "
    "paper's side of 0: the interval contains it (consistent), lies wholly short of it (smaller) or beyond it "
    "(larger); an estimate on the other side: opposite side; no paper number: no comparable figure in the paper. "
    "With at most 10 seeds the exact sign-flip p is printed beside the t p and the row says when the two disagree "
    "at its level; fewer than 3 seeds print neither p nor interval. Tuned comparisons over different LR grids: "
    "not comparable."
)


@dataclass(frozen=True)
class Decision:
    """What a row is decided on: the test's role, p, family and the interval at its level."""

    role: str  # PRIMARY | SECONDARY
    n: int
    mean_diff: float
    sd_diff: float
    p: float  # the two-sided t p, or the TOST p for an equivalence test
    p_holm: float = math.nan  # primary only
    family_size: int = 0  # primary only
    divisor: float = 1.0  # Holm judged this test at ALPHA / divisor (1 for a secondary check)
    margin: float | None = None  # a TOST margin: this is an equivalence test
    p_exact: float = math.nan  # the exact sign-flip p of the same differences (a difference test's second opinion)

    @property
    def equivalence(self) -> bool:
        return self.margin is not None

    @property
    def level(self) -> float:
        k = self.divisor if math.isfinite(self.divisor) else 1.0
        return 1.0 - (2.0 if self.equivalence else 1.0) * ALPHA / k

    @property
    def interval(self) -> tuple[float, float]:
        return t_interval(self.n, self.mean_diff, self.sd_diff, self.level)

    @property
    def alpha(self) -> float:
        """The two-sided level of the row's interval, which its power columns use too."""
        return 1.0 - self.level


@dataclass(frozen=True)
class Floor:
    """A choice task's chance level and the items behind the reference's mean (not testable below it)."""

    chance: float
    items: int

    @property
    def threshold(self) -> float:
        return self.chance + 2.0 * math.sqrt(self.chance * (1.0 - self.chance) / max(1, self.items))


@dataclass(frozen=True)
class Verdict:
    label: str
    reason: str
    short: str = ""  # the reason in a few words (the ledger's column)
    magnitude: str = MAG_NONE


def magnitude(low: float, high: float, paper_effect: float | None) -> str:
    """Where the interval lies against the paper's effect (same units, arm - reference); the estimate is the
    interval's midpoint (a t interval is symmetric about the mean difference)."""
    if paper_effect is None or not math.isfinite(paper_effect) or paper_effect == 0:
        return MAG_UNKNOWN
    if not (math.isfinite(low) and math.isfinite(high)):
        return MAG_UNKNOWN
    sign = 1.0 if paper_effect > 0 else -1.0
    if sign * (low + high) / 2.0 < 0:  # "smaller" than the paper's effect would read as a weaker same-side effect
        return MAG_OPPOSITE_SIDE
    a, b = sorted((sign * low, sign * high))  # the paper's effect is now +|effect|
    if b < abs(paper_effect):
        return MAG_SMALLER
    if a > abs(paper_effect):
        return MAG_LARGER
    return MAG_CONSISTENT


def judge(expect: str | None, better: str, d: Decision, scale: Scale | None = None,
          paper_effect: float | None = None, reference_mean: float = math.nan, floor: Floor | None = None,
          not_reached: str = "", same_grid: bool = True, reference_sd: float = math.nan) -> Verdict:
    """Rules 2-5 of the module docstring for one row. `not_reached`: a speedup's did-not-reach text;
    `reference_sd`: the reference's sd over its seeds (0: it does not move)."""
    scale_text = scale.describe(d.n) if scale else "scale: unknown"

    def said(label: str, why: str, short: str, mag: str = MAG_NONE) -> Verdict:
        return Verdict(label, f"{why}; {scale_text}", short, mag)

    if expect is None:
        low, high = d.interval if d.n >= MIN_SEEDS else (math.nan, math.nan)
        return Verdict(NO_CLAIM, "the paper makes no claim about this arm; measured only" + _exact_note(d, low, high),
                       "context arm" + _exact_short(d, low, high))
    if d.n == 0:
        return said(NOT_MEASURED, "not measured for this arm and its reference", "not measured")
    if d.n < MIN_SEEDS:
        return said(TOO_FEW_SEEDS, f"only {d.n} paired seed(s); the rule needs {MIN_SEEDS}", f"{d.n} seed(s)")
    if not_reached:
        return said(DID_NOT_REACH, f"did not reach the reference's final val/loss within its budget {not_reached}, "
                                   "so there is no speedup to put an interval on", not_reached)
    if floor is not None and math.isfinite(reference_mean) and reference_mean < floor.threshold:
        return said(NOT_TESTABLE, f"the reference's mean {reference_mean:.3f} is below chance {floor.chance:.3g} + "
                                  f"2 binomial SE of {floor.items} items = {floor.threshold:.3f}: at the chance floor",
                    f"at chance ({floor.chance:.3g})")
    if reference_sd == 0:
        return said(NOT_TESTABLE, f"the reference gives the same value on every seed ({reference_mean:.4g}): the "
                                  "metric does not move at this scale", "reference does not move")
    if d.sd_diff == 0 and d.mean_diff == 0:  # no t to compute, and no difference on any seed to find
        return said(NO_DETECTABLE, "every paired difference is exactly 0: the arm equals its reference on every "
                                   "seed", "identical on every seed")
    if not same_grid:
        return said(NOT_COMPARABLE, "the two sides were tuned over different LR grids", "LR grids differ")
    low, high = d.interval
    where = f"{100 * d.level:.4g}% interval [{low:+.4g}, {high:+.4g}]"
    if d.role == PRIMARY:
        where += f" (Holm judged it at alpha/{d.divisor:g}; Holm p {d.p_holm:.3g} over {d.family_size})"
    else:
        where += f" (secondary; raw p {d.p:.3g})"
    if expect == "none" and d.equivalence:
        return _equivalence(d, low, high, where, said)
    if expect == "none":
        if low > 0 or high < 0:
            label = NOT_REPRODUCED if d.role == PRIMARY else CONSISTENT_EFFECT
            return said(label, f"{where} excludes 0 where the paper reports no effect{_exact_note(d, low, high)}",
                        "an effect; paper: none" + _exact_short(d, low, high))
        return said(NO_DETECTABLE, f"{where} contains 0; no equivalence margin is declared, so this is not "
                                   f"'no effect'{_exact_note(d, low, high)}", "contains 0; no margin")
    claimed = -1.0 if (better == "lower") == (expect == "better") else 1.0  # the sign of the claimed difference
    mag = magnitude(low, high, paper_effect)
    paper_text = (f"the paper's effect {paper_effect:+.3g} in our units" if paper_effect is not None
                  else "the paper gives no number in these units")
    exact, exact_short = _exact_note(d, low, high), _exact_short(d, low, high)
    if low > 0 or high < 0:
        same_side = (low > 0) == (claimed > 0)
        label = SUPPORTED[d.role][0 if same_side else 1]
        side = "the claimed" if same_side else "the opposite"
        return said(label, f"{where} lies wholly on {side} side of 0; {paper_text}: {mag}{exact}",
                    f"{'claimed' if same_side else 'opposite'} side; magnitude {mag}{exact_short}", mag)
    return said(NO_DETECTABLE, f"{where} contains 0; {paper_text}: {mag}{exact}",
                f"contains 0; magnitude {mag}{exact_short}", mag)


def _equivalence(d: Decision, low: float, high: float, where: str, said) -> Verdict:
    """A TOST row in its own words: the equivalence bounds, the (1 - 2 alpha) interval, what TOST concluded."""
    inside, outside = EQUIVALENCE[d.role]
    m = d.margin
    bounds = f"equivalence bounds [-{m:.3g}, +{m:.3g}]"
    level = "1 - 2 alpha" + (f"/{d.divisor:g}" if d.divisor != 1 else "")
    head = f"TOST against the {bounds}: the {where.replace(' interval', f' ({level}) interval', 1)}"
    if -m < low and high < m:
        return said(inside, f"{head} lies inside them: TOST concludes equivalence (TOST p {d.p:.3g})",
                    f"equivalent within +/-{m:.3g}")
    if high < -m or low > m:
        return said(outside, f"{head} lies wholly outside them: TOST does not conclude equivalence (TOST p "
                             f"{d.p:.3g}), and the difference is beyond the margin", f"beyond +/-{m:.3g}")
    return said(CANNOT_TELL, f"{head} crosses them: TOST does not conclude equivalence (TOST p {d.p:.3g}), nor is "
                             "the difference beyond the margin", f"crosses +/-{m:.3g}")


def _exact_disagrees(d: Decision, low: float, high: float) -> bool:
    """Whether the exact sign-flip test decides otherwise than the t interval at the row's level."""
    if d.n > EXACT_NOTE_MAX_SEEDS or not (math.isfinite(d.p_exact) and math.isfinite(low)):
        return False
    return (low > 0 or high < 0) != (d.p_exact < d.alpha)


def _exact_note(d: Decision, low: float, high: float) -> str:
    if not _exact_disagrees(d, low, high):
        return ""
    floor = 2.0 / 2 ** d.n
    if low > 0 or high < 0:
        return (f"; the exact sign-flip p {d.p_exact:.3g} is not below the row's level {d.alpha:.3g} (with {d.n} "
                f"seeds it cannot go below {floor:.3g}): the t-test alone decides this row")
    return f"; the exact sign-flip p {d.p_exact:.3g} is below the row's level {d.alpha:.3g} where the t interval holds 0"


def _exact_short(d: Decision, low: float, high: float) -> str:
    return f"; exact p {d.p_exact:.3g} disagrees" if _exact_disagrees(d, low, high) else ""


def best_of(scores: list[float], better: str) -> int:
    """Index of the best mean (lower or higher is better); NaN is worst, ties keep the earlier one."""
    sign = -1.0 if better == "lower" else 1.0
    ranked = [sign * s if math.isfinite(s) else -math.inf for s in scores]
    return max(range(len(ranked)), key=lambda i: (ranked[i], -i))
