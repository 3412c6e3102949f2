"""Verdicts: the rule, the families, one line per tested check and the full table."""

from __future__ import annotations

from analysis import markdown as md
from analysis.exploratory import EXPLORATORY, ledger_gate
from analysis.report_context import ReportContext
from analysis.sections import Section
from analysis.verdict import PRIMARY, RULE_TEXT


def section(ctx: ReportContext) -> Section:
    verdicts, families, provenance = ctx.verdicts, ctx.families, ctx.provenance
    body = [f"**Rule.** {RULE_TEXT}", ""]
    kept_out = ledger_gate(verdicts)
    if kept_out:
        body += ["**Exploratory protocol: not in the ledger** until its primary checks pass the gates the shipped "
                 "protocols pass (analysis/exploratory.py): " + "; ".join(kept_out) + ".", ""]
    if verdicts.empty:
        body.append("_No check applies to these arms._")
        return Section("Verdicts", body)
    primary = verdicts[verdicts["role"] == PRIMARY]
    m = int(primary["family_size"].max()) if not primary.empty else 0
    if not families.declared:
        body += [f"No protocol declares this claim's families, so every test with an expectation is primary: "
                 f"one Holm family of {m} tests.", ""]
    else:
        body += [f"Families declared in `{families.source}`: {m} primary test(s) Holm-adjusted together; the "
                 "rest are secondary (raw p, 95% interval).", ""]
        if not (provenance or {}).get("checks_sha256"):
            body += ["_These families were declared after these data were exported (the provenance has no "
                     "`checks_sha256`): the split into primary and secondary was made with the data seen._", ""]
    for _, v in verdicts.iterrows():
        line = (f"- {v['role'].capitalize()}: `{v['arm']}` vs `{v['reference']}` on `{v['metric']}`: **{v['verdict']}**"
                + (f", magnitude {v['magnitude']}" if v["magnitude"] not in ("-", "") else "") + f" ({v['reason']}).")
        if v["selection"]:
            line += f" Tuned: {v['selection']}."
        if v["added_after_data"]:
            line += f" _Added after the data were seen: {v['added_after_data']}._"
        if v.get(EXPLORATORY):
            line += f" **Exploratory:** {v[EXPLORATORY]}."
        body.append(line)
    body += ["", md.table(verdicts, [
        ("arm", "arm"), ("reference", "reference"), ("variant", "variant"), ("metric", "check"), ("role", "role"),
        ("expect", "paper expects"), ("n", "seeds"), ("diff", "mean diff"), ("ci_low", "low"),
        ("ci_high", "high"), ("ci_level", "level"), ("p_test", "p (raw)"), ("p_holm", "p (Holm)"),
        ("family_size", "m"), ("paper_effect", "paper effect"), ("seed_sd", "seed sd"), ("mdd", "MDD"),
        ("seeds_needed", "seeds for 80%"), ("verdict", "direction"), ("magnitude", "magnitude"),
    ], {"diff": md.signed, "ci_low": md.signed, "ci_high": md.signed, "paper_effect": md.signed,
        "p_test": md.pvalue, "p_holm": md.pvalue, "ci_level": lambda x: md.fmt(x, 4)})]
    if (verdicts["metric"] == "speedup").any():
        body += ["", "For `speedup` the difference is the mean over seeds of ln(reference budget / arm tokens to the "
                 "reference's final val/loss): 0 means no speedup, ln 2 = 0.693 means 2x; the paper effect is ln "
                 "of its speedup. The speedup table below has the first-crossing reading beside it."]
    return Section("Verdicts", body)
