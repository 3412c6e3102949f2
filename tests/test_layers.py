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

    tree = ast.parse(path.read_text())
    visit(tree)
    out |= _entry_points(name, tree, modules)
    return out


def _entry_points(name: str, tree: ast.AST, modules: dict) -> set[str]:
    """Modules `name` starts as a process: "-m", "<module>" as neighbouring string literals (an argv list).
    A subprocess is an import in all but name. "python -m x" inside one string is not counted:
    here those are sentences telling the user what to type, not processes started."""
    strings = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    named = [b for a, b in zip(strings, strings[1:]) if a == "-m"]
    # Across folders only: a driver starting its own workers (sweeps.sweep_workers) is one folder's business.
    return {target for target in named if target in modules and _folder(target) != _folder(name)}


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


# The folders bottom -> top; a folder is lit_modules' first-level package or module, or sweeps/analysis.
ORDER = (
    "lit_modules.model", "lit_modules.errors", "lit_modules.typed_settings", "lit_modules.steady_heap", "lit_modules.hf", "lit_modules.distributed", "lit_modules.diagnostics",
    "lit_modules.optim", "lit_modules.config", "lit_modules.data", "lit_modules.verified_checkpoint", "lit_modules.runs",
    "lit_modules.techniques", "lit_modules.technique_reports", "lit_modules.process_group",
    "lit_modules.tracking", "lit_modules.callbacks", "lit_modules.lm_module", "lit_modules.hook_profiler", "lit_modules.activation_checkpointing",
    "lit_modules.build", "lit_modules.rebuild", "lit_modules.plan", "lit_modules.evaluation", "lit_modules.export",
    "lit_modules.quiet", "lit_modules.stack_dumps", "lit_modules.resume",
    "lit_modules.training_run", "lit_modules.train", "lit_modules.finetune", "lit_modules.goldens",
    "lit_modules.bench", "lit_modules", "analysis", "sweeps",
)
MAX_UPWARD = 3  # imports back up against ORDER, allowed while their owners move them
TECHNIQUES_WITHIN = 3  # techniques/ sits at most this many folders above model/


def _folder(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "lit_modules" and len(parts) > 1 else parts[0]


def _folder_edges(graph: dict[str, set[str]]) -> dict[tuple[str, str], list[str]]:
    """folder -> folder, with the module imports that make each edge."""
    edges: dict[tuple[str, str], list[str]] = {}
    for module, targets in graph.items():
        for target in targets:
            a, b = _folder(module), _folder(target)
            if a != b:
                edges.setdefault((a, b), []).append(f"{module} -> {target}")
    return edges


def _folder_graph(edges) -> dict[str, set[str]]:
    folders: dict[str, set[str]] = {}
    for a, b in edges:
        folders.setdefault(a, set()).add(b)
        folders.setdefault(b, set())
    return folders


def test_the_graph_sees_subprocess_entry_points():
    modules = {"sweeps.optuna_sweep": None, "lit_modules.train": None, "x": None}
    tree = ast.parse('cmd = [sys.executable, "-m", "sweeps.optuna_sweep"]\nline = "python -m lit_modules.train a=b"')
    assert _entry_points("x", tree, modules) == {"sweeps.optuna_sweep"}
    # bench/first_sentence.py times `python -m lit_modules.train` as a process: the graph sees it.
    assert "lit_modules.train" in _graph()["lit_modules.bench.first_sentence"]


def test_no_folder_imports_itself_back():
    edges = _folder_edges(_graph())
    cycles = _cycles(_folder_graph(edges))
    detail = [line for cycle in cycles for (a, b), lines in sorted(edges.items()) if a in cycle and b in cycle
              for line in sorted(lines)]
    assert cycles == [], "folder cycle(s):\n" + "\n".join(detail)


def test_every_folder_has_a_place_and_few_imports_go_back_up():
    edges = _folder_edges(_graph())
    folders = set(_folder_graph(edges))
    assert folders <= set(ORDER), f"place these folders in ORDER: {sorted(folders - set(ORDER))}"
    rank = {f: i for i, f in enumerate(ORDER)}
    upward = sorted(line for (a, b), lines in edges.items() if rank[a] < rank[b] for line in lines)
    assert len(upward) <= MAX_UPWARD, "imports back up against ORDER:\n" + "\n".join(upward)


def test_techniques_sit_just_above_the_model():
    """Plug-ins live on the lowest layer they can: the longest import chain from techniques/ down to model/."""
    folders = _folder_graph(_folder_edges(_graph()))
    depth: dict[str, int] = {}

    def height(f: str) -> int:  # folders on the longest chain down to model/ (the graph is acyclic, see above)
        if f not in depth:
            below = [height(g) for g in folders[f]]
            depth[f] = 0 if f == "lit_modules.model" else max([h + 1 for h in below if h >= 0], default=-1)
        return depth[f]

    assert 0 < height("lit_modules.techniques") <= TECHNIQUES_WITHIN
