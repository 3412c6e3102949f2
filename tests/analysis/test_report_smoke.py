"""End to end: the real `smoke` ablation (2 arms x 2 seeds, real training) ends with a valid report.

Slow (a minute on an idle 2-core machine, several when it is shared); the fast equivalent on a
hand-made store is tests/analysis/test_report.py.
"""

import re

import matplotlib.image
import pytest
from mlflow.tracking import MlflowClient

from analysis.verdict import TOO_FEW_SEEDS
from lit_modules.tracking.store import tracking_uri

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_smoke_ablation_ends_with_a_report(tmp_path, monkeypatch):
    from sweeps.ablate import main

    monkeypatch.setenv("LLM_REPORTS_DIR", str(tmp_path / "reports"))
    runs_dir = tmp_path / "runs"
    assert main(["experiment=smoke", f"runs_dir={runs_dir}"]) == 0

    report = tmp_path / "reports" / "smoke" / "report.md"
    text = report.read_text()
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert "loss_vs_tokens.png" in images
    for name in images:
        path = report.parent / name
        assert path.read_bytes()[:8] == PNG_SIGNATURE, name
        assert matplotlib.image.imread(path).ndim == 3, name
    verdicts = [line for line in text.splitlines() if line.startswith(("- Primary:", "- Secondary:"))]
    # Two seeds per arm: the rule refuses to conclude, and says why.
    assert verdicts == [line for line in verdicts if f"**{TOO_FEW_SEEDS}**" in line and "2 paired seed" in line]
    assert any("`no_decay` vs `baseline` on `val/loss`" in line for line in verdicts)
    assert "4 FINISHED" in text

    client = MlflowClient(tracking_uri(None, str(runs_dir)))
    parent = client.search_runs(
        [e.experiment_id for e in client.search_experiments()],
        filter_string="tags.`ablation.role` = 'parent' and tags.`ablation.name` = 'smoke'",
    )[0]
    assert "report/report.md" in {a.path for a in client.list_artifacts(parent.info.run_id, "report")}
