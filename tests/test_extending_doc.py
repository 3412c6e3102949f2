"""docs/extending.md replayed from scratch: in a temporary copy of the repository, every file the page shows
is written (an edit block applied), every command it runs is run in order, and each prints what the page
says it prints. Nothing else is edited, so the page is the whole recipe for a trick of one's own."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "extending.md"
FENCE = re.compile(r"^```(\w+)(?: ([^\n]*))?\n(.*?)^```\n", re.S | re.M)
RUN_ID = re.compile(r"run ([0-9a-f]{32}) finished")


def blocks(text: str) -> list[tuple[str, str, str]]:
    """(language, info, body) of every fenced block, in page order."""
    return [(m.group(1), (m.group(2) or "").strip(), m.group(3)) for m in FENCE.finditer(text)]


def apply_edit(path: Path, body: str) -> None:
    """An edit block: hunks after `@@`; in each, '-' lines are replaced by '+' lines, ' ' lines kept."""
    text = path.read_text()
    for hunk in body.split("@@")[1:]:
        old, new = [], []
        for line in hunk.splitlines():
            if line.startswith(("---", "+++")) or not line:
                continue
            kind, rest = line[0], line[1:]
            if kind in " -":
                old.append(rest)
            if kind in " +":
                new.append(rest)
        before, after = "\n".join(old) + "\n", "\n".join(new) + "\n"
        assert before in text, f"{path.name}: the page's context is not in the file:\n{before}"
        text = text.replace(before, after, 1)
    path.write_text(text)


def copy_repository(target: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in files.decode().split("\0"):
        if not name or name.startswith(("results/", "RESULTS.md")):
            continue
        source, dest = REPO / name, target / name
        if source.is_file():
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, dest)


def test_the_page_builds_a_trick_to_a_verdict_and_an_export(tmp_path):
    repo = tmp_path / "repo"
    copy_repository(repo)
    env = {**os.environ, "PYTHONPATH": str(repo), "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
           "MLFLOW_DISABLE_TELEMETRY": "true", "TOKENIZERS_PARALLELISM": "false"}
    written, last_output, run_id, steps = [], "", "", blocks(PAGE.read_text())
    for i, (language, info, body) in enumerate(steps):
        if info.startswith("file="):
            path = repo / info.split("=", 1)[1]
            if language == "diff":
                apply_edit(path, body)
            else:
                assert not path.exists(), f"the page writes {path.name}, which the repository already has"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(body)
            written.append(info.split("=", 1)[1])
        elif language == "bash" and info in ("run", "refused"):
            command = body.strip().replace("<run id>", run_id)
            assert command.startswith("python "), "the page runs commands with python -m"
            done = subprocess.run(f"{sys.executable} {command[len('python '):]}", shell=True, cwd=repo, env=env,
                                  capture_output=True, text=True, timeout=900)
            last_output = done.stdout + done.stderr
            expected_rc = 0 if info == "run" else 2
            assert done.returncode == expected_rc, f"{command}\n{last_output[-3000:]}"
            found = RUN_ID.search(last_output)
            run_id = found.group(1) if found else run_id
        elif language == "output":
            assert body.strip() in last_output, f"block {i}: expected {body.strip()!r} in:\n{last_output[-3000:]}"
    # Only what the page names was written or edited.
    assert len(written) == len(set(written)) >= 10
    # The export is a plain Llama with the temperatures folded in; the verdict is in the claim's words.
    assert (repo / "exported" / "model.safetensors").is_file()
    verdicts = pd.read_csv(repo / "results" / "qk_temperature" / "verdicts.csv", keep_default_na=False)
    primary = verdicts[verdicts["role"] == "primary"].iloc[0]
    assert primary["arm"] == "temperature" and int(primary["n"]) == 3 and "paper" not in primary["reason"]
    assert "below its regime" in primary["exploratory"]
    assert "qk_temperature" not in (repo / "RESULTS.md").read_text().split("## Verdicts")[-1]
    report = (repo / "results" / "qk_temperature" / "report.md").read_text()
    assert "## Residual stream" in report


@pytest.mark.parametrize("text, expected", [
    ("```python file=a.py\nx = 1\n```\n", [("python", "file=a.py", "x = 1\n")]),
    ("```bash run\npython -m x\n```\n```output\nok\n```\n", [("bash", "run", "python -m x\n"), ("output", "", "ok\n")]),
])
def test_the_page_is_read_block_by_block(text, expected):
    assert blocks(text) == expected


def test_an_edit_block_replaces_its_lines_and_refuses_a_stale_context(tmp_path):
    target = tmp_path / "f.py"
    target.write_text("a\nb\nc\n")
    apply_edit(target, "@@\n b\n+x\n")
    assert target.read_text() == "a\nb\nx\nc\n"
    with pytest.raises(AssertionError, match="context is not in the file"):
        apply_edit(target, "@@\n-zzz\n+y\n")
