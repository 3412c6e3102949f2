"""Each technique's report metadata is data in its folder: it loads, its figures are of known kinds, the
claims keep the numbers their derivations give, and no report or plot code names a technique."""

from __future__ import annotations

import math
import re

import pytest

from analysis import declared_figures
from analysis.claims import CLAIMS, claim_for
from lit_modules.technique_reports import (
    TechniqueReportError,
    curve_prefixes,
    figure_specs,
    read_report,
    technique_reports,
)
from tests.helpers.runs import REPO


def test_every_folder_reads_and_declares_known_figures_with_distinct_files():
    names = [r.name for r in technique_reports()]
    assert names == sorted(p.parent.name for p in (REPO / "lit_modules/techniques").glob("*/report.yaml"))
    specs = [*declared_figures.CORE_FIGURES, *figure_specs()]
    assert all(spec["kind"] in declared_figures.FIGURE_KINDS and spec["caption"] for spec in specs)
    files = [spec["file"] for spec in specs]
    assert len(files) == len(set(files)) and "loss_vs_tokens.png" not in files
    assert "wisca/" in curve_prefixes() and "diag/gmcn/" in curve_prefixes()


def test_a_malformed_report_is_refused_by_name(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "report.yaml").write_text("claim: {}\nplots: []\n")
    with pytest.raises(TechniqueReportError, match="unknown key.*plots"):
        read_report(tmp_path / "x" / "report.yaml")


def test_claim_numbers_are_their_derivations():
    wisca, mols, pc = CLAIMS["wisca"], CLAIMS["mols"], CLAIMS["pc_layer"]
    assert wisca.checks[0].relative_effects["qk_vo_tensor"] == math.log(1 - 0.0212) / 1.3193
    assert wisca.paper_tpp == 1.4e9 / 1.1e9
    assert mols.checks[0].relative_effects["snr"] == math.log(1 - 0.84 / 34.06) / math.log(34.06)
    assert mols.paper_tpp == 1.31e9 / (8 * (4 * 512**2 + 3 * 512 * 1376))
    assert pc.paper_tpp == 57.7e9 / (16 * (4 * 1024**2 + 3 * 1024 * 2816))
    assert pc.checks[0].effects == {"adamw_pc4": 1.63, "muon_pc2": 1.07}
    assert claim_for("wd_plasticity_full") is CLAIMS["wd_plasticity"] and CLAIMS["smoke"].expect == {"no_decay": "none"}


@pytest.mark.parametrize("module", ["plots.py", "ablation_report.py", "report.py", "ablation.py", "store_ablation.py",
                                    "report_context.py", *sorted(p.relative_to(REPO / "analysis").as_posix()
                                                                 for p in (REPO / "analysis/report_sections").glob("*.py"))])
def test_report_and_plot_code_name_no_technique(module):
    text = (REPO / "analysis" / module).read_text().lower()
    named = [r.name for r in technique_reports() if re.search(rf"\b{re.escape(r.name)}\b", text)]
    words = [w for w in ("wisca", "mols", "pc layer", "small init", "z-loss") if w in text]
    assert named == [] and words == []
