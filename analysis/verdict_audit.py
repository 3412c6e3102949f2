"""A reader's check over committed verdict tables: what a reviewer would trip over, rule by rule.

    python -m analysis.verdict_audit [results=results]      # exit 1 and one line per finding

Each rule reads only the columns of `results/<paper>/verdicts.csv` (the rule itself: analysis/verdict.py;
the statistics it must follow: shared/reference/statistics.md):

- interval: a printed interval is the paired t interval of (n, diff, sd_diff) at the printed level;
- direction: the verdict word is the one its interval supports (and a secondary check never says "reproduced");
- few seeds: a row with fewer than MIN_SEEDS seeds prints no p and no interval;
- noise: no effect within floating-point rounding of 0 is printed as an effect;
- magnitude: "smaller / larger / consistent" only for an estimate on the paper's side of 0;
- cannot tell: a decided direction never sits beside a magnitude of "cannot tell";
- TOST: an equivalence row prints its bounds (+/- the margin), its (1 - 2 alpha/k) interval and says TOST;
- Holm: every declared primary check counts in the family (one with no p too), and each Holm p re-derives;
- exact: a row of at most EXACT_NOTE_MAX_SEEDS seeds prints the sign-flip p beside p_t and says when they
  disagree at its level.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

from analysis.stats import NOISE, holm_adjust, t_interval
from analysis.verdict import (
    ALPHA, CONSISTENT, CONSISTENT_OPPOSITE, EXACT_NOTE_MAX_SEEDS, MAG_CONSISTENT, MAG_LARGER, MAG_SMALLER,
    MIN_SEEDS, NO_DETECTABLE, OPPOSITE, PRIMARY, REPRODUCED, SECONDARY, magnitude,
)

VERDICTS_FILE = "verdicts.csv"
DECIDED = (REPRODUCED, OPPOSITE, CONSISTENT, CONSISTENT_OPPOSITE)
TOLERANCE = 1e-6  # relative agreement of a re-derived number with the printed one


@dataclass(frozen=True)
class Finding:
    rule: str
    row: str
    text: str

    def line(self, paper: str = "") -> str:
        return f"{paper + ': ' if paper else ''}{self.row}: [{self.rule}] {self.text}"


def _row_name(r: pd.Series) -> str:
    return f"{r['arm']} vs {r['reference']} on {r['metric']}"


def _finite(x: object) -> bool:
    return isinstance(x, (int, float)) and math.isfinite(x)


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= TOLERANCE * max(1.0, abs(a), abs(b))


def _excludes_zero(r: pd.Series) -> bool:
    return bool(r["ci_low"] > 0 or r["ci_high"] < 0)


def interval_rule(r: pd.Series) -> str:
    if not _finite(r["ci_low"]):
        return ""
    low, high = t_interval(int(r["n"]), r["diff"], r["sd_diff"], r["ci_level"])
    if not (_close(low, r["ci_low"]) and _close(high, r["ci_high"])):
        return f"the printed interval [{r['ci_low']:+.4g}, {r['ci_high']:+.4g}] is not the t interval [{low:+.4g}, {high:+.4g}]"
    return ""


def direction_rule(r: pd.Series) -> str:
    v = r["verdict"]
    if not _finite(r["ci_low"]):
        return f"'{v}' without an interval" if v in DECIDED else ""
    excludes = _excludes_zero(r)
    if v in DECIDED and r["expect"] != "none":
        if not excludes:
            return f"'{v}' beside an interval that contains 0"
        claimed = -1.0 if (r["better"] == "lower") == (r["expect"] == "better") else 1.0
        if ((1.0 if r["ci_low"] > 0 else -1.0) == claimed) != (v in (REPRODUCED, CONSISTENT)):
            return f"'{v}' where the interval lies on the other side"
    if v == NO_DETECTABLE and excludes and r["test"].startswith("difference"):
        return "'no detectable effect' beside an interval that excludes 0"
    if r["role"] == SECONDARY and v in (REPRODUCED, OPPOSITE):
        return "a secondary check worded as a primary one"
    return ""


def few_seeds_rule(r: pd.Series) -> str:
    if int(r["n"]) >= MIN_SEEDS:
        return ""
    printed = [c for c in ("p_t", "p_sign_flip", "p_test", "ci_low", "ci_high") if _finite(r.get(c, math.nan))]
    return f"{int(r['n'])} seed(s) yet prints {', '.join(printed)}" if printed else ""


def noise_rule(r: pd.Series) -> str:
    d = r["diff"]
    scale = max(1.0, abs(r.get("mean_ref", 1.0)) if _finite(r.get("mean_ref")) else 1.0)
    return f"prints rounding noise {d:+.3g} as an effect" if _finite(d) and 0 < abs(d) <= NOISE * scale else ""


def magnitude_rule(r: pd.Series) -> str:
    mag, effect, d = r["magnitude"], r["paper_effect"], r["diff"]
    if mag not in (MAG_SMALLER, MAG_LARGER, MAG_CONSISTENT) or not (_finite(effect) and _finite(d)):
        return ""
    if d * effect < 0:
        return f"'{mag}' for an estimate {d:+.3g} on the other side of 0 from the paper's {effect:+.3g}"
    if _finite(r["ci_low"]) and mag != magnitude(r["ci_low"], r["ci_high"], effect):
        return f"'{mag}' is not where the interval lies against the paper's {effect:+.3g}"
    return ""


def cannot_tell_rule(r: pd.Series) -> str:
    return (f"'{r['verdict']}' beside a magnitude of 'cannot tell'"
            if r["verdict"] in DECIDED and str(r["magnitude"]).startswith("cannot tell") else "")


def tost_rule(r: pd.Series) -> str:
    if not str(r["test"]).startswith("equivalence") or not _finite(r["ci_low"]):
        return ""
    m = r["margin"]
    if not (_finite(m) and _close(r.get("equivalence_low", math.nan), -m)
            and _close(r.get("equivalence_high", math.nan), m)):
        return "an equivalence row without its equivalence bounds"
    k = r["holm_divisor"] if r["role"] == PRIMARY and _finite(r["holm_divisor"]) else 1.0
    if not _close(r["ci_level"], 1 - 2 * ALPHA / k):
        return f"an equivalence row at level {r['ci_level']:.4g}, not 1 - 2 alpha/{k:g}"
    if "TOST" not in str(r["reason"]) or "equivalence bounds" not in str(r["reason"]):
        return "an equivalence row that does not say what TOST concluded against its bounds"
    return ""


def exact_rule(r: pd.Series) -> str:
    if not MIN_SEEDS <= int(r["n"]) <= EXACT_NOTE_MAX_SEEDS or not _finite(r["p_t"]) \
            or not str(r["test"]).startswith("difference"):
        return ""
    if not _finite(r["p_sign_flip"]):
        return "prints p_t without the exact sign-flip p"
    if not _finite(r["ci_low"]):
        return ""
    if _excludes_zero(r) != (r["p_sign_flip"] < 1 - r["ci_level"]) and "exact sign-flip" not in str(r["reason"]):
        return f"the exact p {r['p_sign_flip']:.3g} disagrees with the interval at its level and the row does not say so"
    return ""


ROW_RULES: dict[str, Callable[[pd.Series], str]] = {
    "interval": interval_rule, "direction": direction_rule, "few seeds": few_seeds_rule, "noise": noise_rule,
    "magnitude": magnitude_rule, "cannot tell": cannot_tell_rule, "TOST": tost_rule, "exact": exact_rule,
}


def holm_findings(rows: pd.DataFrame) -> list[Finding]:
    """Every primary check in the family, each Holm p re-derived (a primary with no p counts as p = 1)."""
    primary = rows[(rows["role"] == PRIMARY) & (rows["expect"] != "-")]
    if primary.empty:
        return []
    members = primary.drop_duplicates(["arm", "reference", "metric", "expect"])
    sizes = sorted({int(s) for s in primary["family_size"]})
    found = [] if sizes == [len(members)] else [Finding(
        "Holm", f"{len(members)} primary checks", f"judged in families of {', '.join(map(str, sizes))}")]
    ps = [p if int(n) >= MIN_SEEDS and _finite(p) else 1.0 for p, n in zip(members["p_test"], members["n"])]
    for (_, r), adjusted in zip(members.iterrows(), holm_adjust(ps)):
        if _finite(r["p_holm"]) and abs(r["p_holm"] - adjusted) > TOLERANCE * max(r["p_holm"], adjusted):
            found.append(Finding("Holm", _row_name(r), f"Holm p {r['p_holm']:.4g} is not {adjusted:.4g} over the family"))
    return found


def audit_table(rows: pd.DataFrame) -> list[Finding]:
    """Every finding in one paper's verdict table (an empty list: a reader trips over nothing)."""
    rows = rows.copy()
    rows["expect"] = rows["expect"].fillna("-")
    for col in ("verdict", "magnitude"):  # a researcher's own hypothesis says "the claim" where a paper's says "the paper"
        rows[col] = rows[col].astype(str).str.replace("the claim", "the paper", regex=False)
    found = [Finding(rule, _row_name(r), text) for _, r in rows.iterrows()
             for rule, check in ROW_RULES.items() if (text := check(r))]
    return found + holm_findings(rows)


def audit_results(results: Path) -> dict[str, list[Finding]]:
    """Per paper folder with a verdicts.csv, its findings."""
    return {folder.name: audit_table(pd.read_csv(folder / VERDICTS_FILE))
            for folder in sorted(results.iterdir()) if (folder / VERDICTS_FILE).is_file()} if results.is_dir() else {}


def main(argv: list[str] | None = None) -> int:
    args = dict(a.split("=", 1) for a in (sys.argv[1:] if argv is None else argv) if "=" in a)
    results = Path(args.get("results", "results"))
    audited = audit_results(results)
    if not audited:
        print(f"error: no {VERDICTS_FILE} under {results}/", file=sys.stderr)
        return 2
    lines = [f.line(paper) for paper, found in audited.items() for f in found]
    print("\n".join(lines) if lines else f"verdict audit: {len(audited)} tables, nothing found")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
