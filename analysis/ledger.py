"""The evidence ledger: every exported results folder -> RESULTS.md, one row per claim check and variant.

    python -m analysis.ledger [results=results] [out=RESULTS.md]

Reads each `<results>/<paper>/data/` (analysis.results_data), re-derives its verdicts with the code the
reports use (analysis.ablation.verdicts_table, the rule in analysis.claims), and writes one row per
(check, headline arm, variant) of each paper's claim: the paper's statement and number, our scale
(parameters, TPP, tokens, seeds), the measured effect with its 95% interval (absolute and relative to
the reference), the tokens-to-target speedup with its interval for speedup checks, the wall-clock
overhead measured per token, the verdict with its reason in a few words and a link to the paper's
report; then one provenance line per paper. A folder's hand-written `findings.md` (what the numbers mean:
does it help, by how much, at what cost, why) is put first, flagged when it was written against an older
export than the one in the folder. The same inputs give a byte-identical file: nothing in it
depends on the time it was written or the order the file system lists folders.
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import pandas as pd

from analysis import markdown as md
from analysis import provenance as prov
from analysis.ablation import Ablation, overhead_table, verdicts_table
from analysis.claims import Claim, claim_for, split_arm
from analysis.verdict import ALPHA, MATCHED_TPP, NO_CLAIM, count, number
from analysis.sections import FINDINGS_FILE, REPORT_FILE
from lit_modules.config.arguments import Arg, Verb, parse_words
from lit_modules.config.errors import ConfigError
from analysis.results_data import DATA_DIR, PARENT_FILE, ResultsDataError, read_results_data

LEDGER_FILE = "RESULTS.md"
# A findings file names the export it reads on its first line, so a re-run of the evidence cannot leave an
# interpretation of numbers that are no longer in the folder unflagged.
READS_PREFIX = "Reads the export of "
COLUMNS = [
    ("paper", "paper"), ("check", "check (arm vs reference, variant)"), ("says", "the paper says"),
    ("scale", "our scale"), ("effect", "effect [95% CI]"), ("relative", "relative to reference [95% CI]"),
    ("speedup", "tokens-to-target speedup [95% CI]"), ("overhead", "wall-clock overhead"),
    ("verdict", "verdict"), ("report", "report"),
]


def result_folders(results: Path) -> list[Path]:
    """Exported folders under `results`, sorted by name."""
    return sorted(p for p in results.iterdir() if (p / DATA_DIR / PARENT_FILE).is_file()) if results.is_dir() else []


def ledger_rows(folder: Path, ab: Ablation, claim: Claim, link_base: Path) -> list[dict]:
    verdicts = verdicts_table(ab, claim)
    if verdicts.empty:
        return []
    cost = overhead_table(ab, claim).set_index("arm")
    rows = verdicts[(verdicts["verdict"] != NO_CLAIM) & verdicts["arm"].map(claim.is_headline)].copy()
    check_order = {c.metric + (" tuned" if c.tuned else ""): i for i, c in enumerate(claim.checks)}
    families = list(claim.headline) or list(dict.fromkeys(split_arm(a)[0] for a in ab.arms))
    variants = ab.variants()
    rows["_check"] = [check_order.get(m + (" tuned" if v == "tuned" else ""), len(check_order))
                      for m, v in zip(rows["metric"], rows["variant"])]
    rows["_family"] = [families.index(f) if (f := split_arm(a)[0]) in families else len(families) for a in rows["arm"]]
    rows["_variant"] = [variants.index(v) if (v := ("" if x == "-" else x)) in variants else len(variants)
                        for x in rows["variant"]]
    rows = rows.sort_values(["_check", "_family", "_variant"], kind="stable")
    link = Path(os.path.relpath(folder / REPORT_FILE, link_base)).as_posix()
    out = []
    for _, r in rows.iterrows():
        variant = "" if r["variant"] == "-" else f", `{r['variant']}`"
        paper_tpp = f" (paper: ~{number(r['paper_tpp'])} TPP)" if math.isfinite(r["paper_tpp"]) else " (paper's TPP unknown)"
        out.append({
            "paper": f"`{claim.preset}`",
            "check": f"`{r['arm']}` vs `{r['reference']}` on `{r['metric']}`{variant}",
            "says": r["paper"] + paper_tpp,
            "scale": (f"{count(r['params_non_embedding'])} non-emb. ({count(r['params_total'])} total), "
                      f"{count(r['tokens'])} tokens, {number(r['tpp'])} TPP, {int(r['n'])} seeds"
                      f"{'' if r['matched'] else '; below matched scale'}"),
            "effect": _effect(r),
            "relative": _relative(r),
            "speedup": _speedup(r),
            "overhead": _overhead(cost, r["arm"]),
            "verdict": f"**{r['verdict']}**: {r['short']}",
            "report": f"[report]({link})",
        })
    return out


def _effect(r: pd.Series) -> str:
    if r["metric"] == "speedup" or not math.isfinite(r["diff"]):
        return "–"
    return f"{r['diff']:+.3g} [{r['ci_low']:+.3g}, {r['ci_high']:+.3g}]"


def _relative(r: pd.Series) -> str:
    ref = abs(r["mean_ref"]) if math.isfinite(r["mean_ref"]) else float("nan")
    if r["metric"] == "speedup" or not (ref > 0 and math.isfinite(r["diff"])):
        return "–"
    return f"{r['diff'] / ref:+.2%} [{r['ci_low'] / ref:+.2%}, {r['ci_high'] / ref:+.2%}]"


def _speedup(r: pd.Series) -> str:
    if r["metric"] != "speedup" or not math.isfinite(r["diff"]):
        return "–"
    return f"{math.exp(r['diff']):.3g}x [{math.exp(r['ci_low']):.3g}x, {math.exp(r['ci_high']):.3g}x]"


def _overhead(cost: pd.DataFrame, arm: str) -> str:
    if arm not in cost.index or not math.isfinite(cost.loc[arm, "ratio"]):
        return "–"
    c = cost.loc[arm]
    return (f"{c['ratio']:.3g}x per token ({c['ratio_min']:.3g}-{c['ratio_max']:.3g} over {int(c['n'])} seeds; "
            f"{c['us_per_token']:.3g} µs/token)")


def provenance_line(folder: Path, claim: Claim) -> str:
    record = prov.read_provenance(folder)
    if record is None:
        return f"- `{claim.preset}` (`{folder.name}/`): no `provenance.json`."
    dirty = " (with uncommitted changes)" if record.get("git_dirty") else ""
    return (f"- `{claim.preset}` (`{folder.name}/`): commit `{str(record.get('git_commit', '?'))[:10]}`{dirty}, {record.get('date', '?')}, "
            f"wall time {prov.wall_time_text(record.get('wall_time_s', float('nan')))}, "
            f"{record.get('workers', '?')} worker(s) x {record.get('threads_per_worker', '?')} thread(s), "
            f"`{record.get('command', '?')}`.")


def findings_section(folder: Path, claim: Claim) -> list[str]:
    """The folder's findings.md under a heading, with a warning when it reads another export."""
    path = folder / FINDINGS_FILE
    if not path.is_file():
        return []
    text = path.read_text().strip()
    first, _, rest = text.partition("\n")
    record = prov.read_provenance(folder) or {}
    current = export_stamp(record)
    lines = [f"### `{claim.preset}`", ""]
    if not first.startswith(READS_PREFIX):
        lines += [f"_This reading does not say which export it reads (its first line should be "
                  f"`{READS_PREFIX}{current}`); check it against the table._", ""]
        rest = text
    elif first[len(READS_PREFIX):].strip().rstrip(".") != current:
        lines += [f"_Written for an earlier export ({first[len(READS_PREFIX):].strip()}); the folder now holds "
                  f"{current}: the table below is current, this text may not be._", ""]
    return [*lines, rest.strip(), ""]


def export_stamp(record: dict) -> str:
    """How a findings file names an export: its commit and date from provenance.json."""
    return f"commit {str(record.get('git_commit', '?'))[:10]}, {record.get('date', '?')}"


def render_ledger(results: Path, out: Path) -> str:
    rows, provenance, findings = [], [], []
    where = Path(os.path.relpath(results, out.parent)).as_posix()  # the file names no machine's paths
    for folder in result_folders(results):
        ab = read_results_data(folder)
        claim = claim_for(ab.claim_key)
        rows += ledger_rows(folder, ab, claim, out.parent)
        provenance.append(provenance_line(folder, claim))
        findings += findings_section(folder, claim)
    lines = [
        "# Results ledger", "",
        f"One row per claim check of each paper's headline arm(s) and model variant, re-derived by "
        f"`python -m analysis.ledger` from the exported measurements in `{where}/<paper>/{DATA_DIR}/` with "
        "the code the reports use (the rule: `analysis/verdict.py`). Our scale: non-embedding (and total) "
        f"parameters, training tokens, TPP = tokens per non-embedding parameter, paired seeds; *matched scale* "
        f"= at least {MATCHED_TPP:g} TPP, or the paper's own TPP where that is lower. Effects are arm − reference "
        "in the check's units, paired by seed, with 95% paired-bootstrap intervals; relative = divided by the "
        f"reference's mean. *Significant* uses Holm-adjusted p < {ALPHA} across each report's tests. Speedup = "
        "reference tokens / arm tokens to reach the reference's final val/loss (geometric mean over seeds). "
        "Overhead = wall time per training token, arm / reference (geometric mean over seeds).", "",
        *(["## What the evidence says", "",
           f"Our reading of each paper's rows below (`results/<paper>/{FINDINGS_FILE}`, written by hand; "
           "the numbers are re-derived).", "", *findings] if findings else []),
        "## Verdicts", "",
        md.table(pd.DataFrame(rows), COLUMNS) if rows else "_No exported results folder has a claim check._", "",
        "## Provenance", "",
        *(provenance or ["_No exported results folder._"]), "",
    ]
    return "\n".join(lines)


def write_ledger(results: str | Path = "results", out: str | Path = LEDGER_FILE) -> Path:
    """Render the ledger and write it in one move (a failed render leaves the previous file)."""
    results, out = Path(results), Path(out)
    text = render_ledger(results, out)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    tmp.write_text(text)
    tmp.replace(out)
    return out


VERB = Verb("ledger", {"results": Arg(default="results", non_empty=True),
                       "out": Arg(default=LEDGER_FILE, non_empty=True)}, case_insensitive=True)


def main(argv: list[str] | None = None) -> int:
    try:
        args = parse_words(sys.argv[1:] if argv is None else argv, VERB).values
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    results = Path(args["results"])
    if not result_folders(results):
        print(f"error: no exported results folder (one with {DATA_DIR}/{PARENT_FILE}) under {results}/",
              file=sys.stderr)
        return 2
    try:
        path = write_ledger(results, args["out"])
    except ResultsDataError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"ledger: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
