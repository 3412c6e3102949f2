"""The git record of a run: source changes make it dirty, the ledger's exported results do not."""

import subprocess

from lit_modules.tracking.repro import git_state


def _repo(tmp_path):
    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)
    git("init", "-q")
    git("config", "user.email", "t@t")
    git("config", "user.name", "t")
    (tmp_path / "model.py").write_text("x = 1\n")
    git("add", ".")
    git("commit", "-qm", "init")
    return git


def test_exported_results_leave_the_tree_clean(tmp_path, monkeypatch):
    _repo(tmp_path)
    (tmp_path / "results" / "wisca").mkdir(parents=True)
    (tmp_path / "results" / "wisca" / "report.md").write_text("# report\n")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")  # pathspecs are from the top, wherever the run starts
    state = git_state()
    assert state["dirty"] is False and "results" not in state["diff"]


def test_source_changes_and_new_source_files_are_dirty(tmp_path, monkeypatch):
    _repo(tmp_path)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "model.py").write_text("x = 2\n")
    state = git_state()
    assert state["dirty"] is True and "x = 2" in state["diff"]
    subprocess.run(["git", "checkout", "model.py"], cwd=tmp_path, check=True)
    (tmp_path / "new_technique.py").write_text("y = 1\n")
    state = git_state()
    assert state["dirty"] is True and "new_technique.py" in state["diff"]
