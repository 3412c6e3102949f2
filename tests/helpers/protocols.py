"""Evidence protocols of a test's own: conf/evidence/odd.yaml written in a folder the driver is pointed at,
and the check that a bad one is refused in one sentence before any cell runs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def protocol_writer(folder: Path, monkeypatch) -> Callable[[str], str]:
    """`write(text)` puts `preset: smoke` + text in <folder>/odd.yaml (the driver reads specs there) -> 'odd'."""
    from sweeps.evidence import protocol_file

    monkeypatch.setattr(protocol_file, "SPEC_DIR", folder)

    def write(text: str) -> str:
        (folder / "odd.yaml").write_text("preset: smoke\n" + text)
        return "odd"

    return write


def assert_refused_before_any_cell(paper: str, tmp_path: Path, capsys, sentence: str, *argv: str) -> None:
    """`make evidence` on the protocol exits 2 with `sentence` as its one line, and no store was made."""
    from sweeps.evidence.driver import main

    assert main([f"papers={paper}", f"runs_dir={tmp_path / 'runs'}", *argv]) == 2
    err = capsys.readouterr().err
    assert sentence in err and err.count("\n") == 1 and err.startswith("error: ")
    assert not (tmp_path / "runs").exists()
