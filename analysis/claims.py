"""Each paper's claim, keyed by preset name, and the rule that turns measurements into a verdict.

Wording and numbers come from shared/reference/papers.md; the source label ([PAPER-ABS], [SECONDARY],
[CODE]) is kept in the text because most numbers are secondary. A claim is a list of checks (a metric
and which direction is better) and, per arm, what the paper leads one to expect:

- "better": the paper reports an improvement for this arm;
- "none":   the paper reports no (or a negligible) effect for this arm;
- "worse":  the paper reports a degradation;
- None:     a context arm (a factorial cell, a second baseline): the paper claims nothing; measured only.

THE VERDICT RULE (`verdict`), per arm and check, the arm against its reference arm paired by seed:

1. Fewer than MIN_SEEDS (3) paired seeds, or the metric not measured: "inconclusive at this scale".
2. "Significant" means BOTH the paired t-test gives p < ALPHA (0.05) AND the 95% paired-bootstrap CI of
   the mean difference excludes zero. (The sign-flip permutation p-value is reported, not used: with n
   seeds it cannot go below 2/2^n, e.g. 0.25 with 3 seeds.)
3. A significant effect smaller than the noise floor (the reference arm's seed-to-seed standard
   deviation of the same metric) is not called: "inconclusive" (effect below the noise floor).
4. Expectation "better" (mirror for "worse"): significant in the expected direction -> "reproduced";
   significant in the other direction -> "not reproduced". Not significant -> "not reproduced" only if
   the run's budget is at least FAR_BELOW (10%) of the paper's AND the t-interval excludes the paper's
   effect size (when the paper gives one in this metric's units); otherwise "inconclusive", with the
   reasons (CI includes zero; budget far below the paper's).
5. Expectation "none": a significant effect above the noise floor -> "not reproduced"; a t-interval
   entirely inside +/- the noise floor -> "reproduced" (no effect beyond seed noise); else "inconclusive".

Arms are never ranked against each other; every comparison is against the arm's reference only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from analysis.stats import NoiseFloor, PairedComparison

MIN_SEEDS = 3
ALPHA = 0.05
FAR_BELOW = 0.1

REPRODUCED = "reproduced"
NOT_REPRODUCED = "not reproduced"
INCONCLUSIVE = "inconclusive at this scale"
NO_CLAIM = "no claim (context arm)"

RULE_TEXT = (
    f"Per arm and check, against the reference arm paired by seed: (1) fewer than {MIN_SEEDS} paired seeds "
    f"or no measurement -> {INCONCLUSIVE}; (2) *significant* = paired t-test p < {ALPHA} AND the 95% "
    "paired-bootstrap CI of the mean difference excludes zero (the sign-flip permutation p is reported, "
    "not used: with n seeds it cannot fall below 2/2^n); (3) a significant effect smaller than the noise floor (the "
    f"reference arm's seed-to-seed standard deviation) -> {INCONCLUSIVE}; (4) where the paper expects an "
    f"improvement: significant in that direction -> {REPRODUCED}, significant the other way -> "
    f"{NOT_REPRODUCED}, not significant -> {NOT_REPRODUCED} only if the budget is at least "
    f"{FAR_BELOW:.0%} of the paper's and the t-interval excludes the paper's effect size, otherwise "
    f"{INCONCLUSIVE}; (5) where the paper expects no effect: significant above the noise floor -> "
    f"{NOT_REPRODUCED}, t-interval inside +/- the noise floor -> {REPRODUCED}, otherwise {INCONCLUSIVE}; "
    f"(6) speedup: an arm that never reaches its reference's final val/loss, with at least the tokens the "
    f"reference needed, on any of at least {MIN_SEEDS} paired seeds is slower on every seed -> {NOT_REPRODUCED} where the paper expects a "
    "speedup; a seed that never reached the target only bounds its speedup from above, so with any such seed "
    f"a speedup is never {REPRODUCED} (at best {INCONCLUSIVE}). "
    "Arms are not ranked against each other; overlapping intervals never name a winner."
)


@dataclass(frozen=True)
class Check:
    """One measurable part of a claim.

    `metric`: a run metric (`val/loss`), a pattern averaged over matching metrics (`eval/*/acc`), a
    fine-tune metric (`finetune:eval/*/acc`, averaged over the run's fine-tune runs) or `speedup`
    (tokens to reach the reference's final val/loss; compared as log speedup against 0).
    `effects`: the paper's effect per arm in this check's units (arm - reference; a ratio for speedup),
    used only by the rule's "rules out the paper's effect" clause. `arms`: if set, the check applies to
    these arms only, with these expectations (overriding the claim's per-arm ones). `measured_only`:
    the paper states this as context, not as a claim, so every arm gets NO_CLAIM.
    """

    metric: str
    better: str  # "lower" | "higher"
    paper: str
    effects: dict[str, float] = field(default_factory=dict)
    arms: dict[str, str | None] = field(default_factory=dict)
    measured_only: bool = False


@dataclass(frozen=True)
class Claim:
    preset: str
    paper: str
    statement: str
    paper_scale: str
    paper_tokens: float | None  # training tokens of the paper's headline runs (None: unknown)
    checks: tuple[Check, ...]
    expect: dict[str, str | None] = field(default_factory=dict)  # per arm; missing arms -> default_expect
    default_expect: str | None = None
    references: dict[str, str] = field(default_factory=dict)  # arm-name prefix -> its reference arm

    def expectation(self, arm: str, check: Check) -> tuple[bool, str | None]:
        """(applies?, expectation) of one arm under one check."""
        if check.measured_only:
            return True, None
        if check.arms:
            return (arm in check.arms), check.arms.get(arm)
        return True, self.expect.get(arm, self.default_expect)

    def reference_arm(self, arm: str, baseline: str) -> str:
        """The arm an arm is compared with: a prefix-specific reference (e.g. muon_* vs muon_baseline)."""
        for prefix, reference in self.references.items():
            if arm.startswith(prefix) and arm != reference:
                return reference
        return baseline


@dataclass(frozen=True)
class Verdict:
    label: str
    reason: str


CLAIMS: dict[str, Claim] = {
    "wisca": Claim(
        preset="wisca",
        paper="WISCA: weight scaling to equivalent models (arXiv 2508.16676)",
        statement=(
            "Periodically rescaling (W_q, W_k) and (W_v, W_o) to equal L1 norms improves training: "
            "+10.1% relative 4-task zero-shot average for QK_TEN + VO_TEN (Llama-1.1B, Wikipedia, 1.4B "
            "tokens) [SECONDARY]; +5.6% average zero-shot and -2.12% average training perplexity across "
            "architectures [PAPER-ABS]. QK or VO alone: about -0.5% / +1.6%."
        ),
        paper_scale="Llama-1.1B on Wikipedia, 1.4B tokens (zero-shot rows); TinyLlama/Qwen2 on TinyStories",
        paper_tokens=1.4e9,
        checks=(
            Check("val/loss", "lower", "-2.12% average training perplexity (about -0.021 nats of loss) [PAPER-ABS]"),
            Check("eval/*/acc", "higher", "+10.1% relative zero-shot average, QK_TEN + VO_TEN [SECONDARY]"),
        ),
        expect={
            "qk_ten": "none", "vo_ten": "none", "qk_vo_ten": "better",
            "qk_row_vo_ten": "better", "qk_vo_ten_init": "better",
        },
        default_expect=None,
    ),
    "small_init": Claim(
        preset="small_init",
        paper="Small Initialization Matters for Large Language Models (arXiv 2606.17945)",
        statement=(
            "Small initialization (std = d_in^-1, gamma = 1 vs 0.5) consistently improves pre-training, most "
            "on reasoning-heavy tasks, once RMSNorm eps is 1e-12 and gated attention removes the attention "
            "sink [PAPER-ABS, SECONDARY]; alone it is restrained by eps saturation and an intensified sink. "
            "No table value could be confirmed."
        ),
        paper_scale="UNCONFIRMED (the group's earlier work: 0.9B-2.4B models on 1T tokens)",
        paper_tokens=None,
        checks=(
            Check("val/loss", "lower", "small init improves pre-training (no number confirmed) [PAPER-ABS]"),
            Check("eval/*/acc", "higher", "largest gains on reasoning-heavy tasks (no number confirmed) [PAPER-ABS]"),
            Check(
                "diag/attention_sink/mean", "lower",
                "small init intensifies the attention sink; gated attention removes it [SECONDARY]",
                arms={"small": "worse", "small_eps": "worse", "small_eps_gate": "better"},
            ),
        ),
        expect={"small": "none", "small_eps_gate": "better"},
        default_expect=None,
    ),
    "mols": Claim(
        preset="mols",
        paper="MoLS: calibrating Adam by module-level gradient SNR (arXiv 2605.05794)",
        statement=(
            "Module-wise learning rates alpha_m = sqrt(S_base / S_m) from a single early SNR estimate reduce "
            "perplexity by 0.84-1.82 on LLaMA 60M-7B (C4) [SECONDARY], comparable to tuned module-wise "
            "learning rates [PAPER-ABS]."
        ),
        paper_scale="LLaMA 60M-7B on C4, GaLore setup (60M: 10k steps x 131k tokens = 1.3B tokens)",
        paper_tokens=1.31e9,
        checks=(Check("val/loss", "lower", "perplexity -0.84 to -1.82 [SECONDARY]"),),
        expect={"snr": "better"},
        default_expect="better",
    ),
    "pc_layer": Claim(
        preset="pc_layer",
        paper="PC layer: polynomial weight preconditioning (arXiv 2606.06470)",
        statement=(
            "Preconditioning FFN and attention-output weights with a fixed odd polynomial of W / sigma_max "
            "reaches the baseline's final loss with 1.63x (Llama-271M) to 2x (Llama-1B) fewer tokens with "
            "AdamW (PC level 4) and 1.07x-1.13x with Muon (level 2); GMCN about 41% lower [SECONDARY]."
        ),
        paper_scale="Llama-271M (57.7B tokens) and Llama-1B (160B tokens) on FineWeb",
        paper_tokens=57.7e9,
        checks=(
            Check("speedup", "higher", "1.63x-2x (AdamW, level 4); 1.07x-1.13x (Muon, level 2) [SECONDARY]",
                  effects={"adamw_pc4": 1.63, "muon_pc2": 1.07}),
            Check("val/loss", "lower", "implied by the speedup (lower loss at equal tokens)"),
            Check("diag/gmcn/all", "lower", "GMCN about 41% lower than the baseline [SECONDARY]"),
        ),
        expect={"adamw_pc4": "better", "muon_pc2": "better"},
        default_expect=None,
        references={"muon_": "muon_baseline"},
    ),
    "wd_plasticity": Claim(
        preset="wd_plasticity",
        paper="Weight Decay Improves Language Model Plasticity (arXiv 2602.11137)",
        statement=(
            "Pre-training with a larger AdamW weight decay (0.3-1.0 vs the default 0.1) gives larger gains "
            "after the same fine-tuning, even when the base model's loss is worse (OLMo-2-1B @140 TPP: base "
            "CE 2.6088 at 0.1 vs 2.6208 at 0.3) [PAPER-ABS, SECONDARY]; larger decay lowers the attention "
            "pseudo-rank; lambda = 10 hurts training."
        ),
        paper_scale="Llama-2 0.5B-4B at 20 tokens/parameter (0.5B: 10B tokens); OLMo-2-1B at 20 and 140 TPP",
        paper_tokens=1.0e10,
        references={"tpp140_": "tpp140_wd0.1"},  # each regime is compared with its own lambda = 0.1
        checks=(
            Check("finetune:finetune/plasticity", "higher", "larger post-fine-tune gains with larger decay [PAPER-ABS]"),
            Check("finetune:finetune/target_loss_after", "lower", "better model after the same fine-tune [PAPER-ABS]"),
            Check("finetune:eval/*/acc", "higher", "larger post-fine-tune gains with larger decay [PAPER-ABS]"),
            Check("diag/attention_rank/qk/pseudo_rank_tau0.01", "lower",
                  "larger decay lowers the QK attention pseudo-rank [SECONDARY]"),
            Check("val/loss", "lower", "base loss may be worse at larger decay (2.6088 vs 2.6208) [SECONDARY]",
                  measured_only=True),
        ),
        default_expect="better",
    ),
    "smoke": Claim(
        preset="smoke",
        paper="none (machinery check)",
        statement=(
            "No paper: the smoke preset exercises the ablation machinery (weight decay 0.1 vs 0.0 on the tiny "
            "model for 15k tokens). Expectation: no effect beyond seed noise."
        ),
        paper_scale="-",
        paper_tokens=None,
        checks=(Check("val/loss", "lower", "no effect expected"),),
        expect={"no_decay": "none"},
        default_expect="none",
    ),
}


def claim_for(preset: str) -> Claim:
    """The preset's claim; a preset without one gets a neutral claim (measured, never judged)."""
    if preset in CLAIMS:
        return CLAIMS[preset]
    return Claim(
        preset=preset,
        paper="none recorded",
        statement=f"No paper claim is recorded for the preset '{preset}' (analysis/claims.py).",
        paper_scale="-",
        paper_tokens=None,
        checks=(Check("val/loss", "lower", "-"),),
        default_expect=None,
    )


def _improvement(diff: float, better: str) -> float:
    """The difference signed so that positive means 'better'."""
    return -diff if better == "lower" else diff


def verdict(
    expect: str | None,
    better: str,
    comparison: PairedComparison | None,
    noise: NoiseFloor | None = None,
    budget_ratio: float | None = None,
    paper_effect: float | None = None,
) -> Verdict:
    """The rule in this module's docstring. `budget_ratio` = this run's tokens / the paper's tokens.

    `paper_effect` is in the same units as the comparison's differences (arm - reference).
    """
    if expect is None:
        return Verdict(NO_CLAIM, "the paper makes no claim about this arm; measured only")
    if comparison is None or comparison.n == 0:
        return Verdict(INCONCLUSIVE, "not measured for this arm and its reference")
    c = comparison
    if c.n < MIN_SEEDS:
        return Verdict(INCONCLUSIVE, f"only {c.n} paired seed(s); the rule needs at least {MIN_SEEDS}")
    significant = (c.p_t < ALPHA) and c.ci_excludes_zero()
    gain = _improvement(c.mean_diff, better)
    floor = noise.sd if noise is not None and math.isfinite(noise.sd) else 0.0
    below_floor = abs(c.mean_diff) < floor
    stats_text = f"mean difference {c.mean_diff:+.4g}, 95% CI [{c.ci_low:+.4g}, {c.ci_high:+.4g}], p_t = {c.p_t:.3g}"
    floor_text = f"noise floor (reference seed sd) {floor:.3g}"
    scale_notes = _scale_notes(budget_ratio)

    if expect == "none":
        if significant and not below_floor:
            return Verdict(NOT_REPRODUCED, f"a significant effect where the paper reports none: {stats_text}")
        if floor > 0 and -floor <= c.t_low and c.t_high <= floor:
            return Verdict(REPRODUCED, f"no effect beyond seed noise: t-interval [{c.t_low:+.3g}, {c.t_high:+.3g}] "
                                       f"inside +/- the {floor_text}")
        return Verdict(INCONCLUSIVE, "; ".join([f"cannot tell 'no effect' from a small one: {stats_text}",
                                                floor_text, *scale_notes]))

    wanted_sign = 1.0 if expect == "better" else -1.0
    if significant and below_floor:
        return Verdict(INCONCLUSIVE, "; ".join([f"significant but below the noise floor: {stats_text}", floor_text,
                                                *scale_notes]))
    if significant and gain * wanted_sign > 0:
        return Verdict(REPRODUCED, "; ".join([f"significant in the claimed direction: {stats_text}", *scale_notes]))
    if significant:
        return Verdict(NOT_REPRODUCED, "; ".join([f"significant in the opposite direction: {stats_text}", *scale_notes]))
    comparable = budget_ratio is not None and budget_ratio >= FAR_BELOW
    if comparable and paper_effect is not None and not (c.t_low <= paper_effect <= c.t_high):
        return Verdict(NOT_REPRODUCED, f"the t-interval [{c.t_low:+.3g}, {c.t_high:+.3g}] excludes the paper's "
                                       f"effect {paper_effect:+.3g}; {stats_text}")
    reasons = [f"CI includes zero or p_t >= {ALPHA}: {stats_text}"]
    if below_floor:
        reasons.append(f"effect below the {floor_text}")
    return Verdict(INCONCLUSIVE, "; ".join(reasons + scale_notes))


def _scale_notes(budget_ratio: float | None) -> list[str]:
    if budget_ratio is None:
        return ["the paper's budget is unknown"]
    if budget_ratio < FAR_BELOW:
        return [f"budget far below the paper's ({budget_ratio:.2g} of its tokens)"]
    return []
