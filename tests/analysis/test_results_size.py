"""The committed results folders stay small as the evidence grows: a size budget for results/ as a whole, figures
at a screen's size, and report pages that show the figures beside them instead of carrying copies."""

import struct
from pathlib import Path

import pytest

from analysis.plots import MAX_PIXELS

RESULTS = Path(__file__).resolve().parents[2] / "results"
BUDGET_BYTES = 15_000_000


def _files(root: Path) -> list[Path]:
    """Every file under `root`, dot-named ones (an export's staging folder) left out."""
    return [p for p in root.rglob("*") if p.is_file() and not any(part.startswith(".") for part in p.relative_to(root).parts)]


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


pytestmark = pytest.mark.skipif(not RESULTS.is_dir(), reason="no results/ folder in this checkout")


def test_the_results_folder_stays_under_its_budget():
    sizes: dict[str, int] = {}
    for path in _files(RESULTS):
        paper = path.relative_to(RESULTS).parts[0]
        sizes[paper] = sizes.get(paper, 0) + path.stat().st_size
    total = sum(sizes.values())
    by_paper = ", ".join(f"{p} {s / 1e6:.1f} MB" for p, s in sorted(sizes.items(), key=lambda kv: -kv[1]))
    assert total < BUDGET_BYTES, f"results/ holds {total / 1e6:.1f} MB (budget {BUDGET_BYTES / 1e6:.0f} MB): {by_paper}"


def test_no_committed_figure_is_larger_than_a_screen():
    pngs = [p for p in _files(RESULTS) if p.suffix == ".png" and "sv_hist" not in p.parts]
    too_large = [f"{p.relative_to(RESULTS)} {w}x{h}" for p in pngs for w, h in [_png_size(p)] if max(w, h) > MAX_PIXELS]
    assert not too_large, f"figures over {MAX_PIXELS} px: {too_large}"


def test_report_pages_name_their_figures_instead_of_embedding_them():
    embedded = [str(p.relative_to(RESULTS)) for p in RESULTS.glob("*/report.html") if "data:image/" in p.read_text()]
    assert not embedded, f"report.html files embedding figures (write_html(embed=False) in a results folder): {embedded}"
