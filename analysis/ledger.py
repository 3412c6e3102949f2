"""The evidence ledger: every exported results folder -> RESULTS.md, readable in a minute.

    python -m analysis.ledger [results=results] [out=RESULTS.md]

Reads each `<results>/<paper>/data/` (analysis.results_data) and re-derives its verdicts with the code the
reports use (analysis.verdict_table, the rule in analysis.verdict). It opens with one line per paper claim
(each primary check's direction and magnitude at its scale) and each paper's forest plot of decision
intervals (drawn by its report); then each folder's hand-written `findings.md` (flagged when written against
an older export); then every row each report tests, primary first: n, mean difference with the interval the
verdict used and its level, raw and Holm p with the family size, the paper's effect in our units, the
reference's seed sd, the power columns, the verdict in parts and the scale; then one provenance line per
paper. Each folder is judged by the families its provenance recorded; one whose cells ran under an earlier
revision of its protocol file says so in one line (analysis.protocol_revision). The same inputs give a
byte-identical file: nothing in it depends on the time it was written or the order the file system lists folders.

The command also checks what it does not print: each folder's derived tables (verdicts, trend, rungs, prediction)
against their re-derivation from `data/` (analysis.derived_files: a file that differs is rewritten and named),
and the reader's check over every verdicts.csv (analysis.verdict_audit: exit 1 when it finds anything).
"""

from __future__ import annotations

import math
import os
import sys
from pathlib import Path

import pandas as pd

from analysis import markdown as md
from analysis import provenance as prov
from analysis.ablation import Ablation
from analysis.comparisons import overhead_table
from analysis.families import Families, families_for
from analysis.compared import as_compared
from analysis.verdict_table import verdicts_table
from analysis.claims import Claim, claim_for, split_arm
from analysis.controls import NULL_ROLE, POSITIVE_ROLE, calibration_lines
from analysis.derived_files import refresh_derived
from analysis.exploratory import gated, ledger_gate
from analysis.glance import claim_line
from analysis.protocol_revision import pending_line, superseded_line
from analysis.verdict_audit import audit_results
from analysis.ledger_text import effect_text, num_text, p_text, paper_effect_text, power_text, scale_text, verdict_text
from analysis.scale import MATCHED_TPP
from analysis.verdict import ALPHA, MIN_SEEDS, NO_CLAIM, PRIMARY, SECONDARY
from analysis.sections import FINDINGS_FILE, REPORT_FILE
from lit_modules.config.arguments import Arg, Verb, parse_words
from lit_modules.config.errors import ConfigError
from analysis.results_data import DATA_DIR, PARENT_FILE, ResultsDataError, read_results_data

LEDGER_FILE = "RESULTS.md"
# A findings file names the export it reads on its first line, so a re-run of the evidence cannot leave an
# interpretation of numbers that are no longer in the folder unflagged.
READS_PREFIX = "Reads the export of "
FOREST_FILE = "forest.png"  # drawn by each report (analysis.forest), embedded here
COLUMNS = [
    ("paper", "paper"), ("check", "check (arm vs reference on metric, variant)"), ("role", "role"),
    ("n", "seeds"), ("effect", "mean diff [interval, level]"), ("p", "p raw / Holm (m)"),
    ("paper_effect", "paper's effect (ours)"), ("seed_sd", "seed sd"), ("power", "MDD / seeds for 80%"),
    ("verdict", "verdict: direction; magnitude"), ("scale", "our scale"), ("report", "report"),
]


def result_folders(results: Path) -> list[Path]:
    """Exported folders under `results`, sorted by name."""
    return sorted(p for p in results.iterdir() if (p / DATA_DIR / PARENT_FILE).is_file()) if results.is_dir() else []


def tested_rows(ab: Ablation, claim: Claim, verdicts: pd.DataFrame | None = None) -> pd.DataFrame:
    """Every row the report tests (context arms left out), primary first, then check, arm and variant order."""
    verdicts = verdicts_table(ab, claim) if verdicts is None else verdicts
    if verdicts.empty:
        return verdicts
    # Context arms make no claim; a secondary row on fewer than MIN_SEEDS seeds (a tuning cell) is no evidence.
    evidence = (verdicts["role"] == PRIMARY) | (verdicts["n"] >= MIN_SEEDS) | (verdicts["n"] == 0)
    claims = verdicts["role"].isin([PRIMARY, SECONDARY])  # the controls have their own section
    rows = verdicts[(verdicts["verdict"] != NO_CLAIM) & evidence & claims].copy()
    check_order = {c.metric + (" tuned" if c.tuned else ""): i for i, c in enumerate(claim.checks)}
    families = list(claim.headline) + [f for f in dict.fromkeys(split_arm(a)[0] for a in ab.arms)
                                       if f not in claim.headline]
    variants = ab.variants()
    rows["_role"] = (rows["role"] != PRIMARY).astype(int)
    rows["_check"] = [check_order.get(m + (" tuned" if v == "tuned" else ""), len(check_order))
                      for m, v in zip(rows["metric"], rows["variant"])]
    rows["_family"] = [families.index(f) if (f := split_arm(a)[0]) in families else len(families) for a in rows["arm"]]
    rows["_variant"] = [variants.index(v) if (v := ("" if x == "-" else x)) in variants else len(variants)
                        for x in rows["variant"]]
    return rows.sort_values(["_role", "_check", "_family", "_variant"], kind="stable")


def ledger_rows(folder: Path, rows: pd.DataFrame, claim: Claim, link_base: Path) -> list[dict]:
    link = Path(os.path.relpath(folder / REPORT_FILE, link_base)).as_posix()
    out = []
    for _, r in rows.iterrows():
        variant = "" if r["variant"] == "-" else f", `{r['variant']}`"
        late = f" _(added after the data were seen: {r['added_after_data']})_" if r["added_after_data"] else ""
        out.append({
            "paper": f"`{claim.preset}`",
            "check": f"`{r['arm']}` vs `{r['reference']}` on `{r['metric']}`{variant}{late}",
            "role": r["role"], "n": str(int(r["n"])), "effect": effect_text(r), "p": p_text(r),
            "paper_effect": paper_effect_text(r), "seed_sd": num_text(r["seed_sd"]), "power": power_text(r),
            "verdict": verdict_text(r), "scale": scale_text(r), "report": f"[report]({link})",
        })
    return out


def provenance_line(folder: Path, claim: Claim) -> str:
    record = prov.read_provenance(folder)
    if record is None:
        return f"- `{claim.preset}` (`{folder.name}/`): no `provenance.json`."
    dirty = " (with uncommitted changes)" if record.get("git_dirty") else ""
    return (f"- `{claim.preset}` (`{folder.name}/`): commit `{str(record.get('git_commit', '?'))[:10]}`{dirty}, {record.get('date', '?')}, "
            f"wall time {prov.wall_time_text(record.get('wall_time_s', float('nan')))}, "
            f"{record.get('workers', '?')} worker(s) x {record.get('threads_per_worker', '?')} thread(s), "
            f"`{record.get('command', '?')}`.")


def findings_section(folder: Path, claim: Claim, superseded: str = "") -> list[str]:
    """The folder's findings.md under a heading, with a warning when it reads another export, and the line
    saying how the folder stands against its protocol (an earlier revision, stages not run) when `superseded`
    holds it."""
    path = folder / FINDINGS_FILE
    if not path.is_file():
        return []
    text = path.read_text().strip()
    first, _, rest = text.partition("\n")
    record = prov.read_provenance(folder) or {}
    current = export_stamp(record)
    lines = [f"### `{claim.preset}`", "", *([f"_{superseded}_", ""] if superseded else [])]
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


def render_ledger(results: Path, out: Path, refreshed: dict[str, list[str]] | None = None,
                  excluded: dict[str, list[str]] | None = None) -> str:
    """The ledger's text; with `refreshed`, each folder's derived tables are checked against its data too
    (analysis.derived_files: rewritten where they differ, their names collected per folder)."""
    table, provenance, findings, glance, forests, outside = [], [], [], [], [], []
    controls: dict[str, pd.DataFrame] = {}
    where = Path(os.path.relpath(results, out.parent)).as_posix()  # the file names no machine's paths
    for folder in result_folders(results):
        record = prov.read_provenance(folder) or {}
        ran = read_results_data(folder)
        ab = as_compared(ran, record)  # what the report compares: no tuning cells, fine-tunes at chosen rates
        claim = claim_for(ab.claim_key)
        families = families_for(ab.name, record)  # the checks these cells ran under, as the export recorded them
        verdicts = gated(verdicts_table(ab, claim, families), ran, record)
        if refreshed is not None:
            refreshed[folder.name] = refresh_derived(folder, ab, verdicts)
        # The controls calibrate the rule, not the protocol: they count whether or not its primaries are evidence.
        controls[folder.name] = verdicts[verdicts["role"].isin([NULL_ROLE, POSITIVE_ROLE])] if not verdicts.empty \
            else verdicts
        kept_out = ledger_gate(verdicts)
        if kept_out:  # an exploratory protocol: named, not judged here (its own report has its rows)
            if excluded is not None:
                excluded[folder.name] = kept_out
            outside.append(f"- `{claim.preset}` (`{folder.name}/`): " + "; ".join(kept_out) + "."
                           + revision_flag(ab.name, record) + partial_flag(record, ab))
            continue
        rows = tested_rows(ab, claim, verdicts)
        if not rows.empty:
            cost = overhead_table(ab, claim).set_index("arm")
            line, _, checks = claim_line(ab, claim, rows, cost, families).partition("\n")
            glance.append(line + declaration_flag(families, record) + revision_flag(ab.name, record)
                          + partial_flag(record, ab)
                          + (f"\n{checks}" if checks else ""))
            table += ledger_rows(folder, rows, claim, out.parent)
        if (folder / FOREST_FILE).is_file():
            rel = Path(os.path.relpath(folder / FOREST_FILE, out.parent)).as_posix()
            forests += [f"![{claim.preset}: decision intervals per check and rung]({rel})", ""]
        provenance.append(provenance_line(folder, claim))
        standing = " ".join(line for line in (superseded_line(ab.name, record), pending_line(record, ab.runs)) if line)
        findings += findings_section(folder, claim, standing)
    lines = [
        "# Results ledger", "",
        f"Every row each paper's report tests, re-derived by `python -m analysis.ledger` from the exported "
        f"measurements in `{where}/<paper>/{DATA_DIR}/` with the code the reports use (the rule: "
        "`analysis/verdict.py`). Differences are arm − reference, paired by seed; the interval is the paired "
        "Student-t interval the verdict was decided on, at the level printed (95% for secondary checks; "
        f"1 − {ALPHA}/k for a primary check Holm judged at {ALPHA}/k, so Holm p < {ALPHA} exactly when it excludes "
        "0; 1 − 2·alpha/k for an equivalence test against its margin). MDD = the difference these seeds detect "
        "with 80% power at the row's level; seeds for 80% = what that power needs against the paper's effect. "
        "Speedup = the reference's budget / the arm's tokens to the reference's final val/loss (first crossing "
        f"beside it). Our scale: non-embedding parameters, tokens, TPP; *matched scale* = at least {MATCHED_TPP:g} "
        "TPP or the paper's own.", "",
        "## Calibration", "",
        ("Does the rule call effects where none exists, and find a harm it was handed? Null controls differ from "
         "their reference only in a nuisance (another draw of the initial weights); positive controls carry a "
         "planted harm (analysis/controls.py). Each is judged on its 95% paired t interval."), "",
        *calibration_lines(controls), "",
        "## The claims at a glance", "", *(glance or ["_No exported results folder has a claim check._"]), "",
        *forests,
        *(["## What the evidence says", "",
           f"Our reading of each paper's rows below (`results/<paper>/{FINDINGS_FILE}`, written by hand; "
           "the numbers are re-derived).", "", *findings] if findings else []),
        *(["## Not in the ledger: exploratory protocols", "",
            "Their primary checks do not pass the gates the shipped protocols pass (a matched regime; no tuned "
            "rate at its grid's edge: analysis/exploratory.py); each one's report has its rows.", "",
            *outside, ""] if outside else []),
        "## Verdicts", "",
        md.table(pd.DataFrame(table), COLUMNS) if table else "_No exported results folder has a claim check._", "",
        "## Provenance", "",
        *(provenance or ["_No exported results folder._"]), "",
    ]
    return "\n".join(lines)


def declaration_flag(families: Families, record: dict) -> str:
    """Whether the checks were declared before these data: the export's provenance holds their hash."""
    if not families.declared:
        return " _(no protocol declares this claim's families: all its tests are one Holm family)_"
    if not record.get("checks_sha256"):
        return (" _(families declared after these data were exported: their provenance has no checks_sha256,"
                " so the split into primary and secondary was made with the data seen)_")
    return ""


def revision_flag(name: str, record: dict) -> str:
    """Whether these cells ran under the protocol file as it is now (analysis.protocol_revision)."""
    line = superseded_line(name, record)
    return f" _{line}_" if line else ""


def partial_flag(record: dict, ab: Ablation) -> str:
    """Whether every stage the protocol declares has run (analysis.protocol_revision)."""
    line = pending_line(record, ab.runs)
    return f" _{line}_" if line else ""


def write_ledger(results: str | Path = "results", out: str | Path = LEDGER_FILE,
                 refreshed: dict[str, list[str]] | None = None, excluded: dict[str, list[str]] | None = None) -> Path:
    """Render the ledger and write it in one move (a failed render leaves the previous file)."""
    results, out = Path(results), Path(out)
    text = render_ledger(results, out, refreshed, excluded)
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
    results, out = Path(args["results"]), Path(args["out"])
    if not (out.parent.is_dir() and os.access(out.parent, os.W_OK)) or out.is_dir():
        print(f"error: out={args['out']}: cannot write the ledger there ({out.parent} is not a writable folder"
              f"{'' if not out.is_dir() else f', or {out} is a folder'}); give out=<a file in a writable folder>",
              file=sys.stderr)
        return 2
    if not result_folders(results):
        print(f"error: no exported results folder (one with {DATA_DIR}/{PARENT_FILE}) under {results}/",
              file=sys.stderr)
        return 2
    refreshed: dict[str, list[str]] = {}
    excluded: dict[str, list[str]] = {}
    try:
        path = write_ledger(results, args["out"], refreshed, excluded)
    except ResultsDataError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for paper, names in refreshed.items():
        if names:
            print(f"rewritten from {results}/{paper}/{DATA_DIR}/: {', '.join(names)} differed from what the data give "
                  f"(redraw its report: make report FROM={results}/{paper})")
    for paper, reasons in excluded.items():
        print(f"not in the ledger (exploratory): {results}/{paper}: {'; '.join(reasons)}")
    found = [f.line(paper) for paper, items in audit_results(results).items() for f in items]
    for line in found:
        print(f"audit: {line}")
    print(f"ledger: {path}; derived tables checked in {len(refreshed)} folders; verdict audit: "
          f"{len(found) or 'nothing'} found")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
