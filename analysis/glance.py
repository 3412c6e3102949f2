"""The ledger's first screen: one bullet per paper, each primary check with what decides it.

Beside each primary check's verdict and interval a bullet carries what a reader needs not to misread it:
- a speedup in tokens beside its cost per token and the speedup on the clock (tokens / wall time per token);
- for a decided primary (reproduced, opposite, not reproduced), what the same check says at the other rungs;
- for a recipe, each component's own share where the protocol declares it (`checks.components`);
- a check moved or added after its data were seen, flagged with the reason (`checks.added_after_data`);
- a primary that is exploratory (analysis/exploratory.py: below its regime, a tuned rate at its grid's edge,
  or fewer seeds than 80% power against the claim's effect needs), with the reason.
The row texts (effect with its interval and level, verdict in parts) are analysis/ledger_text.py's.
"""

from __future__ import annotations

import math

import pandas as pd

from analysis.ablation import Ablation
from analysis.claims import Claim
from analysis.comparisons import compare
from analysis.families import Families
from analysis.ledger_text import effect_text, verdict_text
from analysis.scale import count, number
from analysis.trend_report import trend_family
from analysis.verdict import MIN_SEEDS, NOT_REPRODUCED, OPPOSITE, PRIMARY, REPRODUCED

DECIDED = (REPRODUCED, OPPOSITE, NOT_REPRODUCED)


def _rung(row: pd.Series) -> str:
    return row["arm"][len(trend_family(row["arm"])) + 1:] or "tiny"


def clock_text(row: pd.Series, cost: pd.DataFrame) -> str:
    """A token speedup's cost per token and its speedup on the clock."""
    if row["metric"] != "speedup" or row["arm"] not in cost.index or not math.isfinite(row["diff"]):
        return ""
    ratio = cost.loc[row["arm"], "ratio"]
    if not math.isfinite(ratio):
        return ""
    tokens = math.exp(row["diff"])
    return (f", {ratio:.3g}x wall time per token, so {tokens / ratio:.3g}x on the clock ({tokens:.3g}x in tokens / "
            f"{ratio:.3g}x)")


def other_rungs_text(row: pd.Series, rows: pd.DataFrame) -> str:
    """What the same check says at the arm's other sizes (a decided primary only)."""
    if row["verdict"] not in DECIDED:
        return ""
    family = trend_family(row["arm"])
    others = rows[(rows["metric"] == row["metric"]) & (rows["arm"] != row["arm"])
                  & (rows["arm"].map(trend_family) == family) & (rows["n"] >= MIN_SEEDS)]
    if others.empty:
        return "; no other rung measured"
    parts = [f"{_rung(o)} ({count(o['params_non_embedding'])}): {o['verdict']}, {effect_text(o)}"
             for _, o in others.sort_values("params_non_embedding", kind="stable").iterrows()]
    return "; other rungs: " + "; ".join(parts)


def components_text(ab: Ablation, row: pd.Series, families: Families) -> str:
    """Each declared component's own share: the recipe arm against the recipe without that part (95% t)."""
    parts = []
    for c in families.components:
        if c.arm != row["arm"] or c.metric != row["metric"]:
            continue
        comparison, _ = compare(ab, c.arm, c.without, c.metric)
        if comparison.n < MIN_SEEDS:
            parts.append(f"{c.part}'s own share (`{c.arm}` vs `{c.without}`): {comparison.n} paired seeds, too few")
            continue
        low, high = comparison.t_interval(0.95)
        parts.append(f"{c.part}'s own share (`{c.arm}` vs `{c.without}`, {comparison.n} seeds, secondary): "
                     f"{comparison.mean_diff:+.3g} [{low:+.3g}, {high:+.3g}; 95%]")
    return "".join(f"; {p}" for p in parts)


def claim_line(ab: Ablation, claim: Claim, rows: pd.DataFrame, cost: pd.DataFrame, families: Families) -> str:
    """One bullet per paper, a sub-bullet per primary check (headline rows when the protocol declares none)
    with what decides it."""
    lead = rows[rows["role"] == PRIMARY] if families.declared else rows[rows["arm"].map(claim.is_headline)]
    parts = []
    for _, r in lead.iterrows():
        late = f" _(added after the data were seen: {r['added_after_data']})_" if r["added_after_data"] else ""
        if r.get("exploratory"):
            late += f" _(exploratory: {r['exploratory']})_"
        parts.append(f"`{r['arm'].partition('@')[0]}` {r['metric']} ({_rung(r)}, {count(r['params_non_embedding'])} "
                     f"params, {number(r['tpp'])} TPP, {int(r['n'])} seeds){late}: {verdict_text(r)}, "
                     f"{effect_text(r)}{clock_text(r, cost)}{components_text(ab, r, families)}"
                     f"{other_rungs_text(r, rows)}")
    if not parts and families.declared and families.primary:
        return (f"- **{claim.preset}**: _no primary check has run yet (declared: "
                f"{', '.join(f'`{k.arm}` {k.metric}' for k in families.primary)})_.")
    if not parts:
        return f"- **{claim.preset}**: _no primary check declared_."
    return f"- **{claim.preset}**:" + "".join(f"\n  - {p}." for p in parts)
