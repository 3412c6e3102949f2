"""The texts of a ledger row: the effect with the interval the verdict used and its level, p raw and Holm,
the paper's effect, the power columns, the verdict in parts and the scale (analysis/ledger.py, analysis/glance.py).
"""

from __future__ import annotations

import math

import pandas as pd

from analysis import markdown as md
from analysis.scale import count, number
from analysis.verdict import DID_NOT_REACH, EXACT_NOTE_MAX_SEEDS, PRIMARY


def num_text(x: float) -> str:
    return number(x) if isinstance(x, float) and math.isfinite(x) else "–"


def effect_text(r: pd.Series) -> str:
    """The mean difference with the interval the verdict used and its level (speedups as ratios)."""
    if not math.isfinite(r["diff"]):
        return "–"
    level = f"{100 * r['ci_level']:.3g}%" if math.isfinite(r["ci_level"]) else "?"
    if r["metric"] == "speedup":
        text = f"{math.exp(r['diff']):.3g}x"
        if math.isfinite(r["ci_low"]):
            text += f" [{math.exp(r['ci_low']):.3g}x, {math.exp(r['ci_high']):.3g}x; {level}]"
        if math.isfinite(r.get("first_crossing", math.nan)):
            text += f"; first crossing {math.exp(r['first_crossing']):.3g}x"
        return text
    if not math.isfinite(r["ci_low"]):
        return f"{r['diff']:+.3g}"
    if str(r.get("test", "")).startswith("equivalence"):  # the (1 - 2 alpha) interval against its bounds
        return (f"{r['diff']:+.3g} [{r['ci_low']:+.3g}, {r['ci_high']:+.3g}; {level}], TOST equivalence bounds "
                f"[{r['equivalence_low']:+.3g}, {r['equivalence_high']:+.3g}]")
    return f"{r['diff']:+.3g} [{r['ci_low']:+.3g}, {r['ci_high']:+.3g}; {level}]"


def p_text(r: pd.Series) -> str:
    """The row's own p (TOST p for an equivalence row), the exact sign-flip p beside a t p on at most
    EXACT_NOTE_MAX_SEEDS seeds, and Holm's p over the family for a primary."""
    raw = md.pvalue(r["p_test"])
    if (str(r.get("test", "")).startswith("difference") and int(r["n"]) <= EXACT_NOTE_MAX_SEEDS
            and math.isfinite(r.get("p_sign_flip", math.nan))):
        raw += f" (sign-flip {md.pvalue(r['p_sign_flip'])})"
    elif str(r.get("test", "")).startswith("equivalence") and math.isfinite(r["p_test"]):
        raw = f"TOST {raw}"
    if r["role"] == PRIMARY and math.isfinite(r["p_holm"]):
        return f"{raw} / {md.pvalue(r['p_holm'])} ({int(r['family_size'])})"
    return raw


def paper_effect_text(r: pd.Series) -> str:
    e = r["paper_effect"]
    if not math.isfinite(e):
        return "–"
    return f"{math.exp(e):.3g}x" if r["metric"] == "speedup" else f"{e:+.3g}"


def power_text(r: pd.Series) -> str:
    if not math.isfinite(r["mdd"]):
        return "–"
    mdd = f"{math.exp(r['mdd']):.3g}x" if r["metric"] == "speedup" else f"{r['mdd']:.3g}"
    needed = r["seeds_needed"]
    if not math.isfinite(needed):
        return f"{mdd} / –" if math.isnan(needed) else f"{mdd} / >1000"
    return f"{mdd} / {int(needed)}"


def verdict_text(r: pd.Series) -> str:
    text = f"**{r['verdict']}**"
    if r["magnitude"] not in ("-", "") and isinstance(r["magnitude"], str):
        text += f"; {r['magnitude']}"
    if math.isfinite(r.get("chance", math.nan)):
        text += f" (chance {r['chance']:.3g}, floor {r['floor']:.3f}, reference {r['mean_ref']:.3f})"
    if r["verdict"] == DID_NOT_REACH:
        text += f" ({r['short']})"
    if "exact p" in str(r.get("short", "")):  # the exact sign-flip test decides otherwise at the row's level
        text += f" (the exact sign-flip p {md.pvalue(r['p_sign_flip'])} disagrees at this level)"
    return text


def scale_text(r: pd.Series) -> str:
    paper_tpp = f"; paper ~{number(r['paper_tpp'])} TPP" if math.isfinite(r["paper_tpp"]) else ""
    return (f"{count(r['params_non_embedding'])} non-emb., {count(r['tokens'])} tokens, {number(r['tpp'])} TPP"
            f"{paper_tpp}{'' if r['matched'] else '; below matched scale'}")
