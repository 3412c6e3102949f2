"""The rule that turns a claim's measurements into a verdict: one place, applied to every (arm, check).

The claims themselves (which checks, which arms expect what) are data (analysis/claims.py, read from each
technique's report.yaml); the comparisons are analysis/ablation.py's. This module decides.

SCALE. Every verdict states the scale it holds at: our non-embedding parameters, tokens, tokens per
non-embedding parameter (TPP) and paired seeds, and the paper's TPP. A run is at *matched scale* when its
TPP is at least MATCHED_TPP (20, compute-optimal), or at least the paper's own TPP where the paper trained
shorter than that. Parameters are scaled down from the paper's, never the TPP.

THE VERDICT RULE (`verdict`), per arm and check, the arm against its reference arm paired by seed:

1. Fewer than MIN_SEEDS (3) paired seeds, or the metric not measured: "inconclusive at this scale".
2. Family-wise error: the p-values of every (arm x check) test of one report with an expectation form one
   family, adjusted by Holm's step-down method (m tests). "Significant" means BOTH the Holm-adjusted
   paired t-test p < ALPHA (0.05) AND the 95% paired-bootstrap CI of the mean difference excludes zero.
   Interval statements use the Bonferroni t-interval at level 1 - ALPHA/m (simultaneous coverage; the
   interval counterpart of Holm's first step). (The sign-flip permutation p-value is reported, not used:
   with n seeds it cannot go below 2/2^n, e.g. 0.25 with 3 seeds.)
3. A significant effect smaller than the *seed sd* (the reference arm's seed-to-seed standard deviation of
   the same metric) is not called: "inconclusive". (The *MDD*, the minimum difference n seeds detect with
   80% power, is reported next to it; the rule does not use it.)
4. Expectation "better" (mirror for "worse"): significant in the expected direction -> "reproduced";
   significant in the other direction -> "not reproduced". Not significant -> "not reproduced" only at
   matched scale AND when the adjusted t-interval excludes the paper's effect (when the paper gives one that
   can be put in this check's units); otherwise "inconclusive", with the reasons.
5. Expectation "none": significant above the seed sd -> "not reproduced"; adjusted t-interval entirely inside
   +/- the seed sd -> "reproduced" (no effect beyond seed noise); else "inconclusive".
6. Speedup (`speedup_verdict`): a seed that never reached its reference's final val/loss only bounds its
   speedup from above, so with any such seed a speedup is never "reproduced"; never reaching it on every one
   of at least MIN_SEEDS paired seeds, with at least the tokens the reference needed, refutes a speedup.
7. Tuned comparisons (`Check.tuned`): an arm family swept over LR variants (`@lr...`) is represented by its
   variant with the best mean metric, the reference family likewise over the same grid, then paired by seed.

Arms are never ranked against each other; every comparison is against the arm's reference only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from analysis.curves import Speedup
from analysis.stats import PairedComparison, SeedNoise, holm_adjust

MIN_SEEDS = 3
ALPHA = 0.05
MATCHED_TPP = 20.0  # compute-optimal tokens per non-embedding parameter
TPP_ROUNDING = 0.005  # budgets are whole optimizer steps: 20 TPP of tiny is 1,043 steps = 19.998 TPP

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
INCONCLUSIVE = "inconclusive at this scale"
NO_CLAIM = "no claim (context arm)"

RULE_TEXT = (
    f"Per arm and check, against the reference arm (same variant) paired by seed: (1) fewer than {MIN_SEEDS} "
    f"paired seeds or no measurement -> {INCONCLUSIVE}; (2) the p-values of all (arm x check) tests of this "
    f"report are Holm-adjusted as one family; *significant* = Holm-adjusted paired t-test p < {ALPHA} AND the "
    "95% paired-bootstrap CI of the mean difference excludes zero; interval statements use the Bonferroni "
    f"t-interval at 1 - {ALPHA}/m (the sign-flip permutation p is reported, not used: with n seeds it cannot "
    "fall below 2/2^n); (3) a significant effect smaller than the *seed sd* (the reference arm's seed-to-seed "
    f"standard deviation) -> {INCONCLUSIVE}; (4) where the paper expects an improvement: significant in that "
    f"direction -> {REPRODUCED}, significant the other way -> {NOT_REPRODUCED}, not significant -> "
    f"{NOT_REPRODUCED} only at *matched scale* (at least {MATCHED_TPP:g} tokens per non-embedding parameter, or "
    "the paper's own TPP where that is lower) and when the adjusted t-interval excludes the paper's effect, "
    f"otherwise {INCONCLUSIVE}; (5) where the paper expects no effect: significant above the seed sd -> "
    f"{NOT_REPRODUCED}, adjusted t-interval inside +/- the seed sd -> {REPRODUCED}, otherwise {INCONCLUSIVE}; "
    "(6) speedup: an arm that never reaches its reference's final val/loss, with at least the tokens the "
    f"reference needed, on any of at least {MIN_SEEDS} paired seeds is slower on every seed -> {NOT_REPRODUCED} "
    "where the paper expects a speedup; a seed that never reached the target only bounds its speedup from "
    f"above, so with any such seed a speedup is never {REPRODUCED} (at best {INCONCLUSIVE}); (7) a *tuned* "
    "check compares each side's best LR variant (best mean over seeds, the same rule and grid on both sides). "
    "The MDD (minimum detectable difference at these seeds) is reported, not used. Arms are not ranked "
    "against each other; overlapping intervals never name a winner."
)


@dataclass(frozen=True)
class Verdict:
    label: str
    reason: str
    short: str = ""  # the reason in a few words (the ledger's column)


@dataclass(frozen=True)
class Scale:
    """Where a comparison holds: our runs' size and budget (one variant), and the paper's TPP."""

    params_total: float
    params_non_embedding: float
    tokens: float
    paper_tpp: float | None = None
    variant: str = ""

    @property
    def tpp(self) -> float:
        ok = math.isfinite(self.params_non_embedding) and self.params_non_embedding > 0
        return self.tokens / self.params_non_embedding if ok else float("nan")

    @property
    def matched_tpp(self) -> float:
        """The TPP a run needs to be at matched scale."""
        return min(MATCHED_TPP, self.paper_tpp) if self.paper_tpp else MATCHED_TPP

    @property
    def matched(self) -> bool:
        return math.isfinite(self.tpp) and self.tpp >= self.matched_tpp * (1 - TPP_ROUNDING)

    def describe(self, seeds: int | None = None) -> str:
        ours = (f"{count(self.params_non_embedding)} non-embedding params ({count(self.params_total)} total), "
                f"{count(self.tokens)} tokens = {number(self.tpp)} TPP")
        if seeds is not None:
            ours += f", {seeds} paired seeds"
        if self.variant:
            ours += f", variant `{self.variant}`"
        paper = f"the paper's ~{number(self.paper_tpp)} TPP" if self.paper_tpp else "the paper's TPP unknown"
        where = "matched scale" if self.matched else "below matched scale"
        return f"scale: ours {ours}; {paper}; {where} (needs >= {number(self.matched_tpp)} TPP)"


def count(x: float) -> str:
    """A parameter or token count in a few characters: 106,816 -> 107k, 2.1e6 -> 2.1M."""
    if x is None or not math.isfinite(x):
        return "?"
    for size, unit in ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(x) >= size:
            return f"{x / size:.3g}{unit}"
    return f"{x:.3g}"


def number(x: float | None) -> str:
    return "?" if x is None or not math.isfinite(x) else f"{x:.3g}"


def _improvement(diff: float, better: str) -> float:
    """The difference signed so that positive means 'better'."""
    return -diff if better == "lower" else diff


def verdict(
    expect: str | None,
    better: str,
    comparison: PairedComparison | None,
    noise: SeedNoise | None = None,
    scale: Scale | None = None,
    paper_effect: float | None = None,
    p_adjusted: float | None = None,
    family_size: int = 1,
) -> Verdict:
    """The rule in this module's docstring, for one arm and check.

    `noise`: the reference arm's seed noise (its seed sd is rule 3's threshold); `scale`: where the
    comparison holds (None: unknown, never matched); `paper_effect`: in the comparison's units (arm -
    reference); `p_adjusted`: the Holm-adjusted p of this test within its family of `family_size` tests
    (None: the raw p, a family of one).
    """
    scale_text = scale.describe(comparison.n if comparison is not None else None) if scale else "scale: unknown"
    if expect is None:
        return Verdict(NO_CLAIM, "the paper makes no claim about this arm; measured only", "context arm")
    if comparison is None or comparison.n == 0:
        return Verdict(INCONCLUSIVE, f"not measured for this arm and its reference; {scale_text}", "not measured")
    c = comparison
    if c.n < MIN_SEEDS:
        return Verdict(INCONCLUSIVE, f"only {c.n} paired seed(s); the rule needs at least {MIN_SEEDS}; {scale_text}",
                       f"too few seeds ({c.n})")
    m = max(1, int(family_size))
    p = c.p_t if p_adjusted is None else p_adjusted
    significant = (p < ALPHA) and c.ci_excludes_zero()
    low, high = c.t_interval(1.0 - ALPHA / m)
    gain = _improvement(c.mean_diff, better)
    sd = noise.sd if noise is not None and math.isfinite(noise.sd) else 0.0
    below_sd = abs(c.mean_diff) < sd
    p_text = f"p_t = {c.p_t:.3g}" + (f", Holm-adjusted {p:.3g} over {m} tests" if p_adjusted is not None else "")
    stats_text = f"mean difference {c.mean_diff:+.4g}, 95% CI [{c.ci_low:+.4g}, {c.ci_high:+.4g}], {p_text}"
    interval_text = f"adjusted t-interval ({1 - ALPHA / m:.4g}) [{low:+.3g}, {high:+.3g}]"
    sd_text = f"seed sd (reference) {sd:.3g}"
    matched = scale is not None and scale.matched

    def said(label: str, parts: list[str], short: str) -> Verdict:
        return Verdict(label, "; ".join([*parts, scale_text]), short)

    if expect == "none":
        if significant and not below_sd:
            return said(NOT_REPRODUCED, [f"a significant effect where the paper reports none: {stats_text}"],
                        "significant effect, paper: none")
        if sd > 0 and -sd <= low and high <= sd:
            return said(REPRODUCED, [f"no effect beyond seed noise: {interval_text} inside +/- the {sd_text}"],
                        "no effect beyond seed sd")
        return said(INCONCLUSIVE, [f"cannot tell 'no effect' from a small one: {stats_text}", sd_text],
                    "interval wider than seed sd")

    wanted_sign = 1.0 if expect == "better" else -1.0
    if significant and below_sd:
        return said(INCONCLUSIVE, [f"significant but below the seed sd: {stats_text}", sd_text],
                    "significant but below seed sd")
    if significant and gain * wanted_sign > 0:
        return said(REPRODUCED, [f"significant in the claimed direction: {stats_text}"],
                    "significant, claimed direction")
    if significant:
        return said(NOT_REPRODUCED, [f"significant in the opposite direction: {stats_text}"],
                    "significant, opposite direction")
    if matched and paper_effect is not None and not (low <= paper_effect <= high):
        return said(NOT_REPRODUCED, [f"at matched scale the {interval_text} excludes the paper's effect "
                                     f"{paper_effect:+.3g}; {stats_text}"], "interval excludes paper's effect")
    reasons = [f"CI includes zero or adjusted p >= {ALPHA}: {stats_text}"]
    if below_sd:
        reasons.append(f"effect below the {sd_text}")
    if not matched:
        short = "not significant; below matched scale"
    elif paper_effect is None:
        reasons.append("the paper gives no effect size in this check's units")
        short = "not significant; no paper effect size"
    else:
        reasons.append(f"the {interval_text} still contains the paper's effect {paper_effect:+.3g}")
        short = "not significant; interval contains paper's effect"
    return said(INCONCLUSIVE, reasons, short)


def speedup_verdict(expect: str | None, v: Verdict, s: Speedup, scale: Scale | None = None) -> Verdict:
    """Rule (6) on top of the t-test verdict of the log speedup. A seed that never reached the target only
    bounds its speedup from above (reference tokens / the arm's budget), so it can never support a claimed
    speedup; on every one of enough seeds, with at least the tokens the reference needed, it refutes one."""
    if not s.not_reached:
        return v
    scale_text = scale.describe(s.n) if scale else "scale: unknown"
    enough_tokens = all(a >= b for a, b in zip(s.arm_budget, s.base_tokens))
    if expect == "better" and s.n >= MIN_SEEDS and s.not_reached == s.n and enough_tokens:
        return Verdict(NOT_REPRODUCED, f"never reached its reference's final val/loss with at least the reference's "
                                       f"tokens on any of {s.n} seeds: speedup < 1x on every seed; {scale_text}",
                       "never reached the reference's loss")
    if v.label == REPRODUCED:
        return Verdict(INCONCLUSIVE, f"{s.not_reached} of {s.n} seeds never reached the target, so their speedup "
                                     f"is only bounded from above; {scale_text}", "some seeds never reached target")
    return v


def tuned_verdict(v: Verdict, same_grid: bool) -> Verdict:
    """Rule (7): a tuned comparison is fair only when both sides were tuned over the same LR grid."""
    if same_grid or v.label not in (REPRODUCED, NOT_REPRODUCED):
        return v
    return Verdict(INCONCLUSIVE, f"the two sides were tuned over different LR grids, so the comparison is not "
                                 f"symmetric; without that: {v.label} ({v.reason})", "LR grids differ")


# ---------------------------------------------------------------------------------------- rule 2: the family


def in_family(expect: str | None, comparison: PairedComparison) -> bool:
    """A test joins the report's family when it has an expectation, enough seeds and a finite p."""
    return expect is not None and comparison.n >= MIN_SEEDS and math.isfinite(comparison.p_t)


def family_p_values(tests: list[tuple[str | None, PairedComparison]],
                    keys: list[object] | None = None) -> tuple[list[float | None], int]:
    """Holm-adjusted p per (expectation, comparison) test (None outside the family), and the family size.

    `keys` name what each test compares (e.g. arm, reference, metric): a test with the key of an earlier
    one is the same hypothesis on the same data (a tuned check that picks the pair an untuned check already
    tests) and is counted once, sharing that test's adjusted p.
    """
    keys = list(range(len(tests))) if keys is None else keys
    first: dict[object, int] = {}
    for i, (expect, c) in enumerate(tests):
        if in_family(expect, c):
            first.setdefault(keys[i], i)
    members = list(first.values())
    adjusted = dict(zip(members, holm_adjust([tests[i][1].p_t for i in members])))
    shared = [adjusted.get(first.get(keys[i], -1)) if in_family(*tests[i]) else None for i in range(len(tests))]
    return shared, len(members)


# ---------------------------------------------------------------------------------------- rule 7: the pick


def best_of(scores: list[float], better: str) -> int:
    """Index of the best mean (lower or higher is better); NaN is worst, ties keep the earlier one."""
    sign = -1.0 if better == "lower" else 1.0
    ranked = [sign * s if math.isfinite(s) else -math.inf for s in scores]
    return max(range(len(ranked)), key=lambda i: (ranked[i], -i))


def judged(expect: str | None, better: str, comparison: PairedComparison, noise: SeedNoise | None,
           scale: Scale | None, paper_effect: float | None, p_adjusted: float | None, family_size: int,
           speedup: Speedup | None = None, same_grid: bool | None = None) -> Verdict:
    """Rules 1-7 for one test: the t-test verdict, then the speedup bound (`speedup` given) and the tuned
    comparison's fairness (`same_grid` given)."""
    v = verdict(expect, better, comparison, None if speedup is not None else noise, scale, paper_effect,
                p_adjusted, family_size)
    if speedup is not None:
        v = speedup_verdict(expect, v, speedup, scale)
    if same_grid is not None:
        v = tuned_verdict(v, same_grid)
    return v
