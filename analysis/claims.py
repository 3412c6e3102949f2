"""Each paper's claim, keyed by preset (or `ablation.claim` tag): data, read from the technique folders.

A technique's claim lives beside it, in `lit_modules/techniques/<name>/report.yaml` (its `claim:` node; the
key is the folder's name, which is also its config group, preset, arm folder and module). Presets that
test another preset's claim are listed there as `presets:`. The one claim that is no paper's, the smoke
preset's machinery check, is here. How a claim's checks become verdicts is analysis/verdict.py.

Wording and numbers come from shared/reference/papers.md; the source label ([PAPER-ABS], [SECONDARY],
[CODE]) is kept in the text because most numbers are secondary; a number we had to convert into our
units is tagged [ASSUMED] with its conversion. A claim is a list of checks (a metric and which direction
is better) and, per arm, what the paper leads one to expect:

- "better": the paper reports an improvement for this arm;
- "none":   the paper reports no (or a negligible) effect for this arm;
- "worse":  the paper reports a degradation;
- None:     a context arm (a factorial cell, a second baseline): the paper claims nothing; measured only.

ARM NAMES AND VARIANTS. An arm may carry a model or sweep variant, `<arm>@<variant>` (`qk_vo_tensor@x4`: the 4x
wider rung; `origin@gqa`; `baseline@lr3e-3`: one point of an LR sweep). Expectations and the reference
mapping apply to the part before `@` (the arm's *family*); an arm's reference is the claim's reference arm
within the same variant (`qk_vo_tensor@x4` vs `origin@x4`), so arms of different model sizes are never paired.

"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from lit_modules.technique_reports import technique_reports

VARIANT_SEP = "@"
SOURCES = ("paper", "hypothesis")  # whose claim a report.yaml states: a publication's, or the researcher's own
LR_VARIANT_PREFIX = "lr"
# A base pre-trained on a tuning seed only to choose its arm's fine-tune rate (sweeps/finetune_tuning.py):
# a cell of the grid that no comparison reads (analysis/finetune_lr_tuning.py reads it).
FINETUNE_TUNING_VARIANT = "ft_tuning"


def split_arm(arm: str) -> tuple[str, str]:
    """`qk_vo_tensor@x4` -> (`qk_vo_tensor`, `x4`); an arm without a variant has the variant ``""``."""
    family, _, variant = str(arm).partition(VARIANT_SEP)
    return family, variant


def join_arm(family: str, variant: str) -> str:
    return f"{family}{VARIANT_SEP}{variant}" if variant else family


def is_lr_variant(variant: str) -> bool:
    return variant.startswith(LR_VARIANT_PREFIX)


def finetune_tuned_arm(arm: str) -> str | None:
    """The arm a fine-tune tuning base tunes (`tpp20_wd0.5@x0.25@ft_tuning` -> `tpp20_wd0.5@x0.25`: the tuning
    variant is the last one, after any size variant), or None for any other arm."""
    tuned, sep, last = str(arm).rpartition(VARIANT_SEP)
    return tuned if sep and last == FINETUNE_TUNING_VARIANT else None


def is_finetune_tuning_base(arm: str) -> bool:
    return finetune_tuned_arm(arm) is not None


@dataclass(frozen=True)
class Check:
    """One measurable part of a claim.

    `metric`: a run metric (`val/loss`), a pattern averaged over matching metrics (`eval/*/acc`), a
    fine-tune metric (`finetune:eval/*/acc`, averaged over the run's fine-tune runs) or `speedup`
    (tokens to reach the reference's final val/loss; compared as log speedup against 0).
    The paper's effect per arm family, used only by the rule's "rules out the paper's effect" clause:
    `effects` in this check's units (arm - reference; a ratio for speedup), or `relative_effects` as a
    relative change (arm - reference) / reference, put in our units with our reference arm's mean;
    `assumption` says how a paper number was converted ([ASSUMED]). `arms`: if set, the check applies to
    these arm families only, with these expectations (overriding the claim's per-arm ones).
    `measured_only`: the paper states this as context, not as a claim, so every arm gets NO_CLAIM.
    `tuned`: compare the best LR variant of each side (rule 7).
    `chance`, `items_per_task`: a choice task's chance level and the items each task scores; a reference
    whose mean is below chance + 2 binomial standard errors is at the floor: not testable at this scale.
    """

    metric: str
    better: str  # "lower" | "higher"
    paper: str
    effects: dict[str, float] = field(default_factory=dict)
    relative_effects: dict[str, float] = field(default_factory=dict)
    assumption: str = ""
    arms: dict[str, str | None] = field(default_factory=dict)
    measured_only: bool = False
    tuned: bool = False
    chance: float | None = None
    items_per_task: int = 0

    def paper_effect(self, arm: str, reference_mean: float) -> float | None:
        """The paper's effect for this arm in the comparison's units (log ratio for speedup), or None."""
        family = split_arm(arm)[0]
        if family in self.effects:
            effect = self.effects[family]
            return math.log(effect) if self.metric == "speedup" else effect
        if family in self.relative_effects and math.isfinite(reference_mean):
            return self.relative_effects[family] * abs(reference_mean)
        return None


@dataclass(frozen=True)
class Claim:
    preset: str
    paper: str
    statement: str
    paper_scale: str
    paper_tokens: float | None  # training tokens of the paper's headline runs (None: unknown)
    checks: tuple[Check, ...]
    expect: dict[str, str | None] = field(default_factory=dict)  # per arm family; missing -> default_expect
    default_expect: str | None = None
    references: dict[str, str] = field(default_factory=dict)  # arm-family prefix -> its reference family
    paper_tpp: float | None = None  # tokens per non-embedding parameter of the paper's headline runs
    paper_tpp_note: str = "the paper's tokens per parameter are unknown"
    arm_paper_tpp: dict[str, float] = field(default_factory=dict)  # family or variant prefix -> paper TPP
    headline: tuple[str, ...] = ()  # arm families the ledger lists (default: every arm with an expectation)
    source: str = "paper"  # "paper": a publication's claim; "hypothesis": a researcher's own, called "the claim"

    def words(self, text: str) -> str:
        """`text` in this claim's words: a researcher's own hypothesis is "the claim", never "the paper"."""
        if self.source == "paper":
            return text
        return text.replace("the paper's", "the claim's").replace("the paper", "the claim")

    def expectation(self, arm: str, check: Check) -> tuple[bool, str | None]:
        """(applies?, expectation) of one arm under one check."""
        family = split_arm(arm)[0]
        if check.measured_only:
            return True, None
        if check.arms:
            return (family in check.arms), check.arms.get(family)
        return True, self.expect.get(family, self.default_expect)

    def reference_arm(self, arm: str, baseline: str) -> str:
        """The arm an arm is compared with, within its own variant: a prefix-specific reference (e.g.
        muon_* vs muon_baseline), else the baseline's family (so muon_baseline itself is compared with it)."""
        family, variant = split_arm(arm)
        for prefix, reference in self.references.items():
            if family.startswith(prefix) and family != reference:
                return join_arm(reference, variant)
        return join_arm(split_arm(baseline)[0], variant)

    def tpp_of_paper(self, arm: str) -> float | None:
        family, variant = split_arm(arm)
        for prefix, tpp in self.arm_paper_tpp.items():
            if family.startswith(prefix) or (variant and variant.startswith(prefix)):
                return tpp
        return self.paper_tpp

    def is_headline(self, arm: str) -> bool:
        family = split_arm(arm)[0]
        if self.headline:
            return family in self.headline
        return any(self.expectation(arm, c)[1] is not None for c in self.checks)


def claim_from_data(preset: str, data: dict) -> Claim:
    """A claim from its report.yaml node (numbers may be written as YAML floats or as strings)."""
    checks = tuple(_check_from_data(c) for c in data.get("checks") or ())
    return Claim(
        preset=preset, paper=data["paper"], statement=data["statement"], paper_scale=data["paper_scale"],
        paper_tokens=_number(data.get("paper_tokens")), checks=checks, expect=dict(data.get("expect") or {}),
        default_expect=data.get("default_expect"), references=dict(data.get("references") or {}),
        paper_tpp=_number(data.get("paper_tpp")),
        paper_tpp_note=data.get("paper_tpp_note", "the paper's tokens per parameter are unknown"),
        arm_paper_tpp={k: _number(v) for k, v in (data.get("arm_paper_tpp") or {}).items()},
        headline=tuple(data.get("headline") or ()), source=_source(preset, data.get("source", "paper")),
    )


def _source(preset: str, source: str) -> str:
    if source not in SOURCES:
        raise ValueError(f"Claim '{preset}': source is one of {', '.join(SOURCES)} (got {source!r}).")
    return source


def _check_from_data(data: dict) -> Check:
    if data.get("chance") is not None and not int(data.get("items_per_task", 0)) > 0:
        raise ValueError(f"Check {data.get('metric')}: a chance level needs items_per_task (the items each task scores).")
    return Check(
        metric=data["metric"], better=data["better"], paper=data["paper"],
        effects={k: _number(v) for k, v in (data.get("effects") or {}).items()},
        relative_effects={k: _number(v) for k, v in (data.get("relative_effects") or {}).items()},
        assumption=data.get("assumption", ""), arms=dict(data.get("arms") or {}),
        measured_only=bool(data.get("measured_only", False)), tuned=bool(data.get("tuned", False)),
        chance=_number(data.get("chance")), items_per_task=int(data.get("items_per_task", 0)),
    )


def _number(value) -> float | None:
    return None if value is None else float(value)


SMOKE = Claim(
    preset="smoke",
    paper="none (machinery check)",
    statement=(
        "No paper: the smoke preset exercises the ablation machinery (weight decay 0.1 vs 0.0 on the tiny "
        "model for 15k tokens). Expectation: no effect beyond seed noise."
    ),
    paper_scale="-",
    paper_tokens=None,
    paper_tpp_note="no paper",
    checks=(Check("val/loss", "lower", "no effect expected"),),
    expect={"no_decay": "none"},
    default_expect="none",
)


def _load_claims() -> tuple[dict[str, Claim], dict[str, str]]:
    claims, aliases = {}, {}
    for report in technique_reports():
        if report.claim is not None:
            claims[report.name] = claim_from_data(report.name, report.claim)
            aliases.update({preset: report.name for preset in report.claim.get("presets") or ()})
    claims[SMOKE.preset] = SMOKE
    return claims, aliases


CLAIMS, ALIASES = _load_claims()  # ALIASES: presets that test another preset's claim


def checked_metrics() -> tuple[str, ...]:
    """Every run metric some claim checks (its name, or a pattern's part before the first `*`), so an export
    keeps the final value of any metric a claim is judged on, a stability check on `train/grad_norm` too."""
    names = {c.metric.partition("*")[0] for claim in CLAIMS.values() for c in claim.checks
             if c.metric != "speedup" and not c.metric.startswith("finetune:")}
    return tuple(sorted(n for n in names if n))


def claim_for(preset: str) -> Claim:
    """The claim of a preset or claim key; one without a claim gets a neutral one (measured, never judged)."""
    key = ALIASES.get(preset, preset)
    if key in CLAIMS:
        return CLAIMS[key]
    return Claim(
        preset=preset,
        paper="none recorded",
        statement=(f"No paper claim is recorded for the preset '{preset}' "
                   "(a technique's claim is in lit_modules/techniques/<name>/report.yaml)."),
        paper_scale="-",
        paper_tokens=None,
        paper_tpp_note="no paper",
        checks=(Check("val/loss", "lower", "-"),),
        default_expect=None,
    )
