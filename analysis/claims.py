"""Each paper's claim, keyed by preset (or `ablation.claim` tag), and the rule that turns measurements into a verdict.

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
from dataclasses import dataclass, field

from analysis.curves import Speedup
from analysis.stats import PairedComparison, SeedNoise

MIN_SEEDS = 3
ALPHA = 0.05
MATCHED_TPP = 20.0  # compute-optimal tokens per non-embedding parameter
TPP_ROUNDING = 0.005  # budgets are whole optimizer steps: 20 TPP of tiny is 1,043 steps = 19.998 TPP
VARIANT_SEP = "@"
LR_VARIANT_PREFIX = "lr"

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


def split_arm(arm: str) -> tuple[str, str]:
    """`qk_vo_tensor@x4` -> (`qk_vo_tensor`, `x4`); an arm without a variant has the variant ``""``."""
    family, _, variant = str(arm).partition(VARIANT_SEP)
    return family, variant


def join_arm(family: str, variant: str) -> str:
    return f"{family}{VARIANT_SEP}{variant}" if variant else family


def is_lr_variant(variant: str) -> bool:
    return variant.startswith(LR_VARIANT_PREFIX)


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


# Papers' tokens per non-embedding parameter (TPP), derived from papers.md:
# - PC layer, Llama-271M: 16 layers x (4 x 1024^2 + 3 x 1024 x 2816) = 205M non-embedding; 57.7B tokens -> 281.
# - MoLS, LLaMA-60M (GaLore): 8 x (4 x 512^2 + 3 x 512 x 1376) = 25.3M non-embedding; 10k x 131k = 1.31B -> 52.
# - WISCA, Llama-1.1B at 1.4B tokens: 1.4B / 1.1B total = 1.3 (its layer shapes are not in papers.md; the
#   non-embedding count is smaller, e.g. 0.97B for TinyLlama's shape -> 1.4 TPP).
# - Weight decay: 20 TPP (Llama-2 0.5B-4B, OLMo-2-1B) and 140 TPP (OLMo-2-1B), as the paper names them.
# - Small init: no model size or token count confirmed -> unknown.
PC_TPP = 57.7e9 / (16 * (4 * 1024**2 + 3 * 1024 * 2816))
MOLS_TPP = 1.31e9 / (8 * (4 * 512**2 + 3 * 512 * 1376))
WISCA_TPP = 1.4e9 / 1.1e9

# WISCA: -2.12% average training perplexity is ln(1 - 0.0212) = -0.0214 nats per (Llama) token; our models
# use other tokenizers, so it is taken as a relative change of the loss against the paper's one stated
# training loss (TinyLlama origin, 1.3193): -1.63% of the reference's loss.
WISCA_REL_LOSS = math.log(1 - 0.0212) / 1.3193
# MoLS: the smallest reported gain, -0.84 PPL, at the 60M GaLore Adam baseline PPL 34.06 (unverified):
# ln(1 - 0.84 / 34.06) = -0.0250 nats per token, relative to that loss ln 34.06 = 3.53: -0.71%.
MOLS_REL_LOSS = math.log(1 - 0.84 / 34.06) / math.log(34.06)

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
        paper_tpp=WISCA_TPP,
        paper_tpp_note="~1.3 TPP: 1.4B tokens / ~1.1B parameters (total; the layer shapes are not known)",
        checks=(
            Check("val/loss", "lower", "-2.12% average training perplexity (about -0.021 nats of loss) [PAPER-ABS]",
                  relative_effects={"qk_vo_tensor": WISCA_REL_LOSS},
                  assumption=f"[ASSUMED] -2.12% perplexity = ln(1 - 0.0212) = -0.0214 nats per Llama token, taken "
                             f"as {WISCA_REL_LOSS:+.2%} of the loss (the paper's TinyLlama origin train loss "
                             "1.3193), since our tokenizer differs"),
            Check("eval/*/acc", "higher", "+10.1% relative zero-shot average, QK_TEN + VO_TEN [SECONDARY]",
                  relative_effects={"qk_vo_tensor": 0.101, "qk_channel_vo_tensor": 0.062, "qk_vo_tensor_init": 0.060},
                  assumption="[ASSUMED] the relative gain of the paper's 4-task average applies to the mean "
                             "accuracy over our local tasks"),
        ),
        expect={
            "qk_tensor": "none", "vo_tensor": "none", "qk_vo_tensor": "better",
            "qk_channel_vo_tensor": "better", "qk_vo_tensor_init": "better",
        },
        default_expect=None,
        headline=("qk_vo_tensor",),
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
        paper_tpp=None,
        paper_tpp_note="unknown: no model size or token count of this paper could be confirmed",
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
        headline=("small", "small_eps_gate"),
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
        paper_tpp=MOLS_TPP,
        paper_tpp_note="~52 TPP: LLaMA-60M has ~25.3M non-embedding parameters, 1.31B tokens",
        checks=(
            Check("val/loss", "lower", "perplexity -0.84 to -1.82 [SECONDARY]",
                  relative_effects={"snr": MOLS_REL_LOSS},
                  assumption=f"[ASSUMED] the smallest gain, -0.84 PPL at the 60M baseline PPL 34.06 (unverified) = "
                             f"{math.log(1 - 0.84 / 34.06):+.4f} nats per token, taken as {MOLS_REL_LOSS:+.2%} of "
                             "the loss"),
            Check("val/loss", "lower",
                  "each side at its own best learning rate: comparable to tuned module-wise LRs [PAPER-ABS], "
                  "beats hand-tuned baselines [SECONDARY]",
                  relative_effects={"snr": MOLS_REL_LOSS}, tuned=True,
                  assumption="[ASSUMED] as for the untuned check"),
        ),
        expect={"snr": "better"},
        default_expect="better",
        headline=("snr",),
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
        paper_tpp=PC_TPP,
        paper_tpp_note="~281 TPP: Llama-271M has 16 x (4 x 1024^2 + 3 x 1024 x 2816) = 205M non-embedding "
                       "parameters, 57.7B tokens",
        checks=(
            Check("speedup", "higher", "1.63x-2x (AdamW, level 4); 1.07x-1.13x (Muon, level 2) [SECONDARY]",
                  effects={"adamw_pc4": 1.63, "muon_pc2": 1.07},
                  assumption="the smaller (Llama-271M) speedups; a speedup is a unitless ratio"),
            Check("val/loss", "lower", "implied by the speedup (lower loss at equal tokens)"),
            Check("diag/gmcn/all", "lower", "GMCN about 41% lower than the baseline [SECONDARY]",
                  relative_effects={"adamw_pc4": -0.41},
                  assumption="[ASSUMED] the -41% (Llama-1B) is AdamW + PC level 4 against its baseline"),
        ),
        expect={"adamw_pc4": "better", "muon_pc2": "better"},
        default_expect=None,
        references={"muon_": "muon_baseline"},
        headline=("adamw_pc4", "muon_pc2"),
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
        paper_tpp=20.0,
        paper_tpp_note="20 TPP (Llama-2 0.5B-4B, OLMo-2-1B) and 140 TPP (OLMo-2-1B), as the paper states them",
        arm_paper_tpp={"tpp20": 20.0, "tpp140": 140.0},
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
        expect={"tpp140_wd0.1": None},  # the 140-TPP reference: a context row against the 20-TPP baseline
        default_expect="better",
        # "0.5-1.0 beats 0.1" at 20 TPP; the one concrete pair, 0.1 vs 0.3, at 140 TPP.
        headline=("tpp20_wd0.5", "tpp140_wd0.3"),
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
        paper_tpp_note="no paper",
        checks=(Check("val/loss", "lower", "no effect expected"),),
        expect={"no_decay": "none"},
        default_expect="none",
    ),
}
ALIASES = {"wd_plasticity_full": "wd_plasticity"}  # presets that test another preset's claim


def claim_for(preset: str) -> Claim:
    """The claim of a preset or claim key; one without a claim gets a neutral one (measured, never judged)."""
    key = ALIASES.get(preset, preset)
    if key in CLAIMS:
        return CLAIMS[key]
    return Claim(
        preset=preset,
        paper="none recorded",
        statement=f"No paper claim is recorded for the preset '{preset}' (analysis/claims.py).",
        paper_scale="-",
        paper_tokens=None,
        paper_tpp_note="no paper",
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
