"""The evidence driver is a small package: no module of sweeps/ imports another that imports it back (not even
for a type), none is over 400 lines, and reading a protocol (what `make ablate` does for an evidence preset)
loads neither the driver nor the ablation driver."""

from __future__ import annotations

import ast
import subprocess
import sys

from tests.helpers.runs import REPO

SWEEPS = REPO / "sweeps"


def _module(path) -> str:
    return ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")


def _graph() -> dict[str, set[str]]:
    """sweeps module -> the sweeps modules it imports anywhere, under TYPE_CHECKING included."""
    paths = {_module(p): p for p in SWEEPS.rglob("*.py")}
    graph = {}
    for name, path in paths.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text())):
            found = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                found = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            targets |= {t for t in found if t in paths and t != name}
        graph[name] = targets
    return graph


def _reaches(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), list(graph[start])
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo += graph.get(m, ())
    return seen


def test_no_sweeps_module_imports_itself_back_even_for_a_type() -> None:
    graph = _graph()
    assert "sweeps.evidence.spec" in graph["sweeps.lr_tuning"]  # the graph sees a TYPE_CHECKING import
    back = sorted(m for m in graph if m in _reaches(graph, m))
    assert back == []
    assert _reaches(graph, "sweeps.evidence.spec") == set()  # the types import nothing of sweeps/


def test_no_file_of_sweeps_is_over_400_lines() -> None:
    sizes = {str(p.relative_to(REPO)): len(p.read_text().splitlines()) for p in SWEEPS.rglob("*.py")}
    assert max(sizes.values()) <= 400, sorted(sizes.items(), key=lambda kv: -kv[1])[:3]


def test_reading_a_protocol_loads_no_driver() -> None:
    code = ("import sys\nfrom sweeps.evidence.protocol_file import protocol_grid\n"
            "names, seeds, words = protocol_grid('evidence/wisca')\n"
            "print(len(names), ','.join(seeds), sorted(m for m in ('sweeps.ablate', 'sweeps.evidence.driver', "
            "'lightning', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True,
                         timeout=300).stdout.split()
    assert out == ["22", "0,1,2,3,4", "[]"]
