"""The layers stay layers: no import cycle, nothing in lit_modules imports sweeps or analysis, and the
analysis layer never loads the model, the techniques or Lightning (it reads runs, CSVs and YAML)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

from tests.helpers.runs import REPO

PACKAGES = ("lit_modules", "sweeps", "analysis")
MODEL_LAYER = ("lit_modules.model", "lit_modules.techniques", "lit_modules.lm_module", "lit_modules.build",
               "lit_modules.train", "lit_modules.training_run")


def _modules() -> dict[str, object]:
    found = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            name = ".".join(path.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__")
            found[name] = path
    return found


def _imports(name: str, path, modules: dict) -> set[str]:
    """Project modules `name` imports, at module level or inside functions (not under TYPE_CHECKING)."""
    is_package = path.name == "__init__.py"
    out: set[str] = set()

    def visit(node) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            targets = []
            if isinstance(child, ast.Import):
                targets = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    parts = name.split(".") if is_package else name.split(".")[:-1]
                    base = ".".join(parts[: len(parts) - child.level + 1] + ([child.module] if child.module else []))
                targets = [base, *(f"{base}.{a.name}" for a in child.names)]
            for target in targets:
                while target and target not in modules and "." in target:
                    target = target.rsplit(".", 1)[0]
                if target in modules and target != name:
                    out.add(target)
            visit(child)

    visit(ast.parse(path.read_text()))
    return out


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], [0]

    def connect(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def test_the_graph_sees_imports_and_cycles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert "lit_modules.config.files" in _graph()["lit_modules.config.composition"]  # `from x import files`


def test_no_module_imports_itself_back():
    assert _cycles(_graph()) == []


def test_lit_modules_never_imports_sweeps_or_analysis():
    upward = sorted((m, t) for m, targets in _graph().items() if m.startswith("lit_modules")
                    for t in targets if t.split(".")[0] in ("sweeps", "analysis"))
    assert upward == []


def test_analysis_never_imports_the_model_layer():
    static = sorted((m, t) for m, targets in _graph().items() if m.startswith("analysis")
                    for t in targets if t.startswith(MODEL_LAYER))
    assert static == []
    # At run time too: every analysis module imported in a fresh interpreter loads none of it, nor torch.
    code = ("import importlib, pkgutil, sys, analysis\n"
            "for m in pkgutil.iter_modules(analysis.__path__): importlib.import_module(f'analysis.{m.name}')\n"
            f"bad = sorted(k for k in sys.modules if k.startswith({MODEL_LAYER!r}) or k in ('torch', 'lightning'))\n"
            "print(','.join(bad))")
    loaded = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=300,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, check=True).stdout.strip()
    assert loaded == ""
