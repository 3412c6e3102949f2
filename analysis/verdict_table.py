"""A claim's checks on an ablation -> one row per (check, arm), each row carrying what its verdict is decided on;
and one more per primary entry that names its own `reference` cell (analysis/families.py).

    table = verdicts_table(ab, claim_for(ab.claim_key))   # families from the protocol (analysis.families)

Per row: n, mean difference, the decision interval and its level, raw p, Holm p and family size (primary
checks), the paper's effect in our units, the reference's seed sd, the minimum detectable difference (MDD)
at 80% power and the seeds 80% power needs against the paper's effect, the chance floor where the metric
has one, and the verdict in parts (direction, magnitude) under analysis/verdict.py's rule.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from analysis.ablation import Ablation, arm_values, items_scored, matched_metrics, scale_of
from analysis.comparisons import compare, comparison_row, reference_of, speedup_of
from analysis.claims import LR_VARIANT_PREFIX, Check, Claim, is_lr_variant, join_arm, split_arm
from analysis.curves import Speedup
from analysis.controls import control_rows
from analysis.families import CheckKey, Families, families_for
from analysis.stats import PairedComparison, SeedNoise, compare_paired, holm_adjust, holm_divisors, mdd, \
    seed_noise, seeds_needed, tost_p
from analysis.verdict import ALPHA, MIN_SEEDS, PRIMARY, SECONDARY, Decision, Floor, best_of, judge

TUNED_VARIANT = "tuned"


@dataclass
class _Test:
    """One (arm, check) comparison before its verdict: the primary ones are adjusted together."""

    check: Check
    arm: str
    reference: str
    expect: str | None
    comparison: PairedComparison
    noise: SeedNoise
    variant: str
    selection: str = ""
    same_grid: bool = True
    speedup: Speedup | None = None
    role: str = SECONDARY
    margin: float | None = None
    late: str = ""
    named_reference: bool = False  # a primary entry named this reference (`reference:`), not the claim

    @property
    def key(self) -> CheckKey:
        arm = split_arm(self.arm)[0] if self.check.tuned else self.arm
        return CheckKey(arm, self.check.metric, self.check.tuned, self.reference if self.named_reference else "")

    def declared_primary(self, families: Families) -> bool:
        """Declared primary as the claim's comparison, or by an entry that names this row's own reference."""
        return families.is_primary(self.key) or families.is_primary(replace(self.key, reference=self.reference))

    @property
    def p(self) -> float:
        """The p of this row's own test: TOST for a 'none' claim with a margin, else the paired t."""
        c = self.comparison
        if self.expect == "none" and self.margin is not None:
            return tost_p(c.n, c.mean_diff, c.sd_diff, self.margin)
        return c.p_t

    def in_family(self, declared: bool = True) -> bool:
        """Every declared primary check counts in Holm's family, decidable or not (statistics.md); where no
        protocol declares the family (every test primary), a check with no measurement at all is left out."""
        return self.role == PRIMARY and self.expect is not None and (declared or self.comparison.n > 0)

    @property
    def family_p(self) -> float:
        """The p Holm ranks: a primary check with no p (too few seeds, a speedup never reached) counts as 1,
        so it widens the family without being rejected."""
        return self.p if self.comparison.n >= MIN_SEEDS and math.isfinite(self.p) else 1.0


def verdicts_table(ab: Ablation, claim: Claim, families: Families | None = None) -> pd.DataFrame:
    """The claim's checks, one row per (check, arm): the decision's numbers, the scale and the verdict."""
    families = families_for(ab.name) if families is None else families
    tests: list[_Test] = []
    for check in claim.checks:
        if check.tuned:
            tests += _tuned_tests(ab, claim, check)
            continue
        for arm in ab.arms:
            applies, expect = claim.expectation(arm, check)
            reference = reference_of(ab, claim, arm)
            if not applies or arm == reference or reference not in ab.arms:  # no reference ran: nothing to compare
                continue
            c, noise, s = _check_comparison(ab, check, arm, reference)
            tests.append(_Test(check, arm, reference, expect, c, noise, split_arm(arm)[1], speedup=s))
    tests += _named_reference_tests(ab, claim, families, tests)
    for t in tests:
        t.role = PRIMARY if t.expect is not None and t.declared_primary(families) else SECONDARY
        t.margin = families.margin(t.check.metric) if t.expect == "none" else None
        t.late = families.late_note(t.key) or families.late_note(replace(t.key, reference=t.reference))
    for t in tests:  # an undeclared family leaves out what was never measured: such a row is not primary
        if t.role == PRIMARY and not t.in_family(families.declared):
            t.role = SECONDARY
    if families.confirmatory_seeds:  # the primary checks are decided on the confirmatory seeds alone
        confirmatory = on_seeds(ab, families.confirmatory_seeds)
        for t in tests:
            if t.role == PRIMARY and not t.check.tuned:
                t.comparison, t.noise, t.speedup = _check_comparison(confirmatory, t.check, t.arm, t.reference)
            elif t.role == PRIMARY:
                t.comparison, t.noise = compare(confirmatory, t.arm, t.reference, t.check.metric)
    p_holm, divisors, size = _primary_family(tests, families.declared)
    rows = [_row(ab, claim, t, p_holm[i], divisors[i], size) for i, t in enumerate(tests)]
    return pd.DataFrame(rows + control_rows(ab, families))


def on_seeds(ab: Ablation, seeds: tuple[int, ...]) -> Ablation:
    """The ablation's runs on `seeds` only (curves and fine-tunes are looked up by run id, so they follow)."""
    keep = {str(s) for s in seeds}
    return replace(ab, finished=ab.finished[ab.finished["seed"].astype(str).isin(keep)].reset_index(drop=True))


def _primary_family(tests: list[_Test], declared: bool = True) -> tuple[list[float], list[float], int]:
    """Holm over the primary tests. A test with the key of an earlier one (a tuned check that picks the
    pair an untuned check already tests) is the same hypothesis on the same data: counted once."""
    first: dict[tuple, int] = {}
    for i, t in enumerate(tests):
        if t.in_family(declared):
            first.setdefault((t.arm, t.reference, t.check.metric, t.expect), i)
    members = list(first.values())
    adjusted = dict(zip(members, holm_adjust([tests[i].family_p for i in members])))
    divisor = dict(zip(members, holm_divisors([tests[i].family_p for i in members], ALPHA)))
    p_holm, divisors = [], []
    for t in tests:
        j = first.get((t.arm, t.reference, t.check.metric, t.expect)) if t.in_family(declared) else None
        decidable = j is not None and t.family_p == t.p
        p_holm.append(adjusted[j] if decidable else math.nan)
        divisors.append(divisor[j] if j is not None else (math.nan if t.role == PRIMARY else 1.0))
    return p_holm, divisors, len(members)


def _row(ab: Ablation, claim: Claim, t: _Test, p_holm: float, divisor: float, family_size: int) -> dict:
    check, c = t.check, t.comparison
    # The reference sets the comparison's budget: an arm with extra parameters (a gate) trained the same
    # tokens, so its own TPP is a little lower, but the comparison is at the reference's scale.
    scale = scale_of(ab, [t.reference], claim.tpp_of_paper(t.arm))
    # The paper's effect is the arm's against its usual reference: a named reference has no figure of its own.
    effect = None if t.named_reference else check.paper_effect(t.arm, c.mean_ref)
    primary_in_family = t.role == PRIMARY and math.isfinite(divisor)
    decision = Decision(t.role if primary_in_family else SECONDARY, c.n, c.mean_diff, c.sd_diff, t.p,
                        p_holm, family_size, divisor if primary_in_family else 1.0, t.margin, c.p_sign_flip)
    floor = _floor(ab, check, t.reference)
    not_reached = t.speedup.not_reached_text() if t.speedup is not None else ""
    v = judge(t.expect, check.better, decision, scale, effect, c.mean_ref, floor, not_reached, t.same_grid,
              t.noise.sd)
    evidence = c.n >= MIN_SEEDS and not not_reached  # fewer seeds are no evidence: no p, no interval printed
    low, high = decision.interval if evidence else (math.nan, math.nan)
    row = comparison_row(t.arm, t.reference, check.metric, check.better, c, t.noise)
    if not evidence:
        row.update({k: math.nan for k in ("ci_low", "ci_high", "boot_low", "boot_high", "p_t", "p_sign_flip")})
    first_crossing = t.speedup.log_first_crossing if t.speedup is not None else {}
    row.update({
        "role": t.role, "variant": t.variant or "-", "expect": t.expect or "-", "paper": check.paper,
        "ci_low": low, "ci_high": high, "ci_level": decision.level if evidence else math.nan,
        "p_test": t.p if evidence else math.nan,
        "test": "equivalence (TOST)" if decision.equivalence else "difference (t)",
        "margin": t.margin if t.margin is not None else math.nan,
        "equivalence_low": -t.margin if decision.equivalence else math.nan,
        "equivalence_high": t.margin if decision.equivalence else math.nan,
        "p_holm": p_holm, "family_size": family_size if t.role == PRIMARY else 0,
        "holm_divisor": divisor if primary_in_family else math.nan,
        "paper_effect": effect if effect is not None else math.nan,
        "mdd": mdd(c.n, c.sd_diff, decision.alpha) if evidence else math.nan,
        "seeds_needed": (seeds_needed(c.sd_diff, effect, decision.alpha)
                         if effect is not None and evidence else math.nan),
        "chance": floor.chance if floor else math.nan, "floor": floor.threshold if floor else math.nan,
        "first_crossing": float(np.mean(list(first_crossing.values()))) if first_crossing else math.nan,
        "params_non_embedding": scale.params_non_embedding, "params_total": scale.params_total,
        "tokens": scale.tokens, "tpp": scale.tpp, "paper_tpp": scale.paper_tpp or math.nan,
        "matched": scale.matched, "selection": t.selection, "assumption": check.assumption,
        "added_after_data": t.late, "verdict": claim.words(v.label), "magnitude": claim.words(v.magnitude),
        "reason": claim.words(v.reason), "short": claim.words(v.short),
    })
    return row


def _floor(ab: Ablation, check: Check, reference: str) -> Floor | None:
    """The chance floor of a choice-task check: the items behind the reference's mean, as its runs logged
    them (eval/<task>/items), else the claim's items_per_task for each task (runs from before that metric)."""
    if check.chance is None:
        return None
    logged = items_scored(ab, reference, check.metric)
    return Floor(check.chance, logged or max(1, matched_metrics(ab, reference, check.metric)) * check.items_per_task)


def _named_reference_tests(ab: Ablation, claim: Claim, families: Families, tests: list[_Test]) -> list[_Test]:
    """A row per primary entry that names its own reference cell: the arm against that cell, beside (never
    instead of) its usual row. One that names the usual reference is the usual row, declared primary."""
    done = {(t.arm, t.reference, t.check.metric) for t in tests if not t.check.tuned}
    found = []
    for key in families.primary:
        if not key.reference or key.arm not in ab.arms or key.reference not in ab.arms \
                or (key.arm, key.reference, key.metric) in done:  # a cell this ablation lacks: nothing to compare
            continue
        check = next((c for c in claim.checks if c.metric == key.metric and not c.tuned), None)
        applies, expect = claim.expectation(key.arm, check) if check is not None else (False, None)
        if not applies:
            continue
        c, noise, s = _check_comparison(ab, check, key.arm, key.reference)
        found.append(_Test(check, key.arm, key.reference, expect, c, noise, split_arm(key.arm)[1], speedup=s,
                           named_reference=True))
        done.add((key.arm, key.reference, key.metric))
    return found


def _tuned_tests(ab: Ablation, claim: Claim, check: Check) -> list[_Test]:
    """Per arm family swept over LR variants, its best variant against the reference family's best
    variant; both sides are picked by the same rule (best mean over seeds) over their LR grids."""
    sweeps: dict[str, list[str]] = {}
    for arm in ab.arms:
        family, variant = split_arm(arm)
        if is_lr_variant(variant):
            sweeps.setdefault(family, []).append(arm)
    tests = []
    for family, arms in sweeps.items():
        applies, expect = claim.expectation(arms[0], check)
        ref_family = split_arm(claim.reference_arm(arms[0], ab.baseline))[0]
        ref_arms = sweeps.get(ref_family, [])
        if not applies or family == ref_family:
            continue
        if not ref_arms:  # only one side was swept: no fair comparison, and the row says so
            missing = join_arm(ref_family, f"{LR_VARIANT_PREFIX}*")
            tests.append(_Test(check, _best(ab, arms, check), missing, expect, compare_paired({}, {}), seed_noise([]),
                               TUNED_VARIANT, f"`{ref_family}` has no LR variants to tune over", False))
            continue
        best, best_ref = _best(ab, arms, check), _best(ab, ref_arms, check)
        grid, ref_grid = [split_arm(a)[1] for a in arms], [split_arm(a)[1] for a in ref_arms]
        same = sorted(grid) == sorted(ref_grid)
        c, noise = compare(ab, best, best_ref, check.metric)
        selection = (f"`{best}` is the best of {', '.join(f'`{a}`' for a in arms)} and `{best_ref}` the best of "
                     f"{', '.join(f'`{a}`' for a in ref_arms)}, both by the {check.better} mean `{check.metric}` "
                     f"over their seeds ({'the same LR grid on both sides' if same else 'DIFFERENT LR grids'}; "
                     "picked on the seeds they are tested on, on both sides alike: an optimistic pick, where "
                     "tuning seeds the test never uses would not be)")
        tests.append(_Test(check, best, best_ref, expect, c, noise, TUNED_VARIANT, selection, same))
    return tests


def _best(ab: Ablation, arms: list[str], check: Check) -> str:
    """The arm with the best mean (finite seeds) of the check's metric."""
    means = []
    for arm in arms:
        values = [v for v in arm_values(ab, arm, check.metric).values() if math.isfinite(v)]
        means.append(float(np.mean(values)) if values else math.nan)
    return arms[best_of(means, check.better)]


def _check_comparison(ab: Ablation, check: Check, arm: str,
                      reference: str) -> tuple[PairedComparison, SeedNoise, Speedup | None]:
    if check.metric != "speedup":
        return (*compare(ab, arm, reference, check.metric), None)
    # Speedup, the papers' reading: per seed ln(reference budget / arm tokens to the reference's final loss),
    # tested against 0. A seed that never reached the target has no speedup: the row says so, no interval.
    s = speedup_of(ab, arm, reference)
    logs = s.log_budget_speedups
    if s.not_reached:
        c = PairedComparison(s.n, s.seeds, *([math.nan] * 10), True)
        return c, seed_noise([]), s
    return compare_paired(logs, {seed: 0.0 for seed in logs}), seed_noise([]), s
