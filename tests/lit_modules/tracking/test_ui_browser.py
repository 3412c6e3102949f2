"""The MLflow UI as a researcher sees it, in a real browser (`make test-ui`; marker `ui`, not in `make test`).

The test makes a store with a small ablation (smoke: 2 arms x 2 seeds) and a small sweep (2 trials), starts
`make mlflow-ui`'s launcher over it on a free loopback port, and drives the system Chromium with Playwright:
cell names are unique and say arm and seed, the cells nest under their parent, the HTML report renders
with its figures in the artifact view, and a run's charts lead with the losses (no init-std charts; the
bookkeeping metrics have no prefix, so MLflow puts them last). Screenshots go to
$LLM_UI_SHOTS (default: the test's tmp folder).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from lit_modules.runs import tags
from tests.helpers.runs import all_runs, mlflow_client
from tests.helpers.servers import start_mlflow_ui

pytestmark = pytest.mark.ui
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FAST = ["trainer.max_steps=20", "trainer.val_every_n_steps=10", "trainer.log_every_n_steps=5", "data.seq_len=64",
        "data.batch_size=8", "data.val_batches=4"]
LOSS_CHARTS = ("train/loss", "val/loss", "val/bits_per_byte")
TIMEOUT_MS = 60_000


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    from sweeps.ablate import main as ablate
    from sweeps.optuna_sweep import main as sweep

    runs_dir = tmp_path_factory.mktemp("ui") / "runs"
    assert ablate(["experiment=smoke", f"runs_dir={runs_dir}", "workers=1", *FAST]) == 0
    assert sweep(["sweep=lr_wd", f"sweep.runs_dir={runs_dir}", "sweep.study_name=ui_sweep", "sweep.n_trials=2",
                  "sweep.pruner.name=none", *FAST]) == 0
    return runs_dir


@pytest.fixture(scope="module")
def ui(store, tmp_path_factory):
    server = start_mlflow_ui(store, tmp_path_factory.mktemp("ui-server"))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def page(ui):
    if CHROMIUM is None:
        pytest.skip("No system Chromium here (Debian package `chromium`; make test-ui installs it).")
    playwright = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (pip extra .[ui]).")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        page.set_default_timeout(TIMEOUT_MS)
        yield page
        browser.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    folder = Path(os.environ.get("LLM_UI_SHOTS") or tmp_path_factory.mktemp("shots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _ablation(store):
    runs = all_runs(store)
    parent = next(r for r in runs if r.data.tags.get(tags.ABLATION_ROLE) == tags.PARENT_ROLE)
    cells = [r for r in runs if r.data.tags.get(tags.PARENT) == parent.info.run_id]
    return parent, cells


def test_cell_names_are_unique_say_arm_and_seed_and_nest_under_their_parent(store, ui, page, shots) -> None:
    parent, cells = _ablation(store)
    names = sorted(c.info.run_name for c in cells)
    assert names == ["smoke/baseline/seed0", "smoke/baseline/seed1", "smoke/no_decay/seed0", "smoke/no_decay/seed1"]
    page.goto(f"{ui.url}/#/experiments/{parent.info.experiment_id}/runs?workflowType=machine_learning")
    row = page.get_by_text(parent.info.run_name, exact=True).first
    row.wait_for()
    # The cells are folded under their parent: not in the table until its row is expanded.
    assert page.get_by_text(names[0], exact=True).count() == 0
    box = row.bounding_box()
    page.mouse.click(box["x"] - 32, box["y"] + box["height"] / 2)  # the expander left of the parent's name
    for name in names:
        page.get_by_text(name, exact=True).first.wait_for()
    page.screenshot(path=str(shots / "run_list.png"))


def test_the_html_report_renders_with_its_figures_in_the_artifact_view(store, ui, page, shots) -> None:
    parent, _ = _ablation(store)
    artifacts = {a.path for a in mlflow_client(store).list_artifacts(parent.info.run_id, "report")}
    assert {"report/report.md", "report/report.html", "report/loss_vs_tokens.png"} <= artifacts
    page.goto(f"{ui.url}/#/experiments/{parent.info.experiment_id}/runs/{parent.info.run_id}/artifacts/report/report.html")
    frame = page.frame_locator("iframe").first
    frame.locator("h1").first.wait_for()
    assert "Reproduction report" in frame.locator("h1").first.inner_text()
    images = frame.locator("img")
    images.first.wait_for()
    assert images.count() >= 2
    widths = images.evaluate_all("imgs => imgs.map(i => i.complete ? i.naturalWidth : 0)")
    assert all(w > 100 for w in widths), widths  # decoded pictures, not broken links
    page.screenshot(path=str(shots / "report.png"))


def test_a_runs_metric_charts_lead_with_the_losses(store, ui, page, shots) -> None:
    """The run page's chart sections, top to bottom: `train` and `val` (the losses), then the bookkeeping
    (learning rates, throughput, tokens seen) in MLflow's unprefixed "Model metrics"; no init-std charts."""
    _, cells = _ablation(store)
    cell = sorted(cells, key=lambda c: c.info.run_name)[0]
    page.goto(f"{ui.url}/#/experiments/{cell.info.experiment_id}/runs/{cell.info.run_id}/model-metrics")
    page.get_by_text("Add section").first.wait_for()
    for key in LOSS_CHARTS:
        page.get_by_text(f"{cell.info.run_name} ({key})").first.wait_for()
    lines = page.inner_text("body").splitlines()
    # A section's header is its name, then its chart count on the next line: "train", "(2)".
    headers = [name for name, count in zip(lines, lines[1:]) if re.fullmatch(r"\(\d+\)", count)]
    assert headers == ["train", "val", "Model metrics"], headers
    charts = [line[len(cell.info.run_name) + 2:-1] for line in lines if line.startswith(f"{cell.info.run_name} (")]
    first = charts[:len(LOSS_CHARTS) + 1]  # the three losses and the grad norm, in the order drawn
    assert set(LOSS_CHARTS) <= set(first) and all(k.startswith(("train/", "val/")) for k in first), charts
    page.locator("svg .trace").last.wait_for()  # plotly has drawn the charts in view
    page.screenshot(path=str(shots / "run_page.png"))
