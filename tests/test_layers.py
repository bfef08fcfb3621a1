"""The tree's shape: imports point one way, no cycles, small modules, a private mirror.

Layers, top to bottom: ``torch`` (a user's PyTorch module accelerated: it runs charlm's
rows and ranks them with the tuner's functions), the commands (``cudnn_rnn/*.py``), then ``charlm`` (the trained
character model: corpus, training, a user's weights, the precision table's job), then ``reporting``,
``compare`` and ``lowbit`` (the 8-bit engine built from cuBLASLt GEMMs, whose candidates
run as worker jobs; side by side: none imports another), then ``matrix``, ``check``,
``engine`` and ``bindings``. A module imports its own package or lower layers only; this
covers imports inside functions too, so a lazy import cannot hide a cycle.
"""
import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# torch (cudnn_rnn.torch: a user's PyTorch module, accelerated) is the top layer: it runs the
# precision table's rows of charlm/ and ranks them with the tuner's functions (a command's)
RANK = {"bindings": 0, "engine": 1, "check": 2, "matrix": 3, "lowbit": 4, "compare": 4,
        "reporting": 4, "charlm": 5, "commands": 6, "torch": 7}
MAX_LINES = 400


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted((ROOT / "cudnn_rnn").rglob("*.py")) + sorted((ROOT / "bindings").rglob("*.py")):
        rel = path.relative_to(ROOT)
        parts = list(rel.with_suffix("").parts)
        if parts[0] == "bindings":
            parts = ["cudnn_rnn"] + parts  # installed as cudnn_rnn.bindings
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(name: str, path: Path) -> set[str]:
    """The project modules ``name`` imports (resolved; ``from pkg import mod`` counts mod)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            subs = {f"{base}.{a.name}" for a in node.names} & set(MODULES)
            out |= subs or {base}  # `from pkg import mod` imports mod; `from mod import x`, mod
    return {m for m in out if m in MODULES and m != name}


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def layer(name: str) -> str:
    parts = name.split(".")
    if len(parts) == 1 or parts[1] not in RANK:
        return "commands"
    return parts[1]


def test_the_tree_is_what_the_readme_describes():
    layers = {layer(m) for m in MODULES}
    assert layers == set(RANK), layers
    assert {"cudnn_rnn.probe", "cudnn_rnn.matrix.record", "cudnn_rnn.engine.flow",
            "cudnn_rnn.check.verify", "cudnn_rnn.compare.pytorch",
            "cudnn_rnn.bindings.library"} <= set(MODULES)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_point_down(name):
    mine = layer(name)
    if name == "cudnn_rnn":
        assert not GRAPH[name], "the package's __init__ imports nothing of its own"
        return
    wrong = [m for m in GRAPH[name] if m != "cudnn_rnn" and layer(m) != mine
             and RANK[layer(m)] >= RANK[mine]]
    assert not wrong, f"{name} ({mine}) imports {wrong}: a layer at or above its own"


def test_no_import_cycles():
    state, cycle = {}, []

    def visit(node, stack):
        state[node] = "open"
        for nxt in sorted(GRAPH[node]):
            if state.get(nxt) == "open":
                cycle.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"

    for node in sorted(GRAPH):
        if node not in state:
            visit(node, [node])
    assert not cycle, " -> ".join(cycle[0])


def test_the_worker_imports_no_command_and_no_comparison():
    reached, todo = set(), ["cudnn_rnn.matrix.worker"]
    while todo:
        m = todo.pop()
        if m not in reached:
            reached.add(m)
            todo += GRAPH[m]
    assert {layer(m) for m in reached - {"cudnn_rnn"}} <= {"matrix", "check", "engine", "bindings"}, reached


def test_reports_never_reach_the_runner():
    """Reading a run needs no cuDNN flow: reporting/ reaches no cell, worker, flow, cuDNN
    object or check (engine.config, the plain description of a configuration, it may)."""
    for start in [m for m in MODULES if layer(m) == "reporting"]:
        reached, todo = set(), [start]
        while todo:
            m = todo.pop()
            if m not in reached:
                reached.add(m)
                todo += GRAPH[m]
        runner = sorted(m for m in reached if m in (
            "cudnn_rnn.matrix.execute", "cudnn_rnn.matrix.worker", "cudnn_rnn.engine.flow",
            "cudnn_rnn.engine.descriptors", "cudnn_rnn.bindings.library") or layer(m) == "check")
        assert not runner, (start, runner)


@pytest.mark.parametrize("name", sorted(MODULES))
def test_modules_stay_small(name):
    lines = len(MODULES[name].read_text().splitlines())
    assert lines <= MAX_LINES, f"{MODULES[name]} has {lines} lines"


def test_nothing_imports_the_mirror_by_a_generic_top_level_name():
    """``import bindings`` stays free for users: the project says cudnn_rnn.bindings."""
    offenders = []
    for path in list(ROOT.glob("cudnn_rnn/**/*.py")) + list(ROOT.glob("tests/*.py")) + \
            list(ROOT.glob("tools/**/*.py")) + list(ROOT.glob("bindings/*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else []
            if any(n == "bindings" or n.startswith("bindings.") for n in names):
                offenders.append(str(path.relative_to(ROOT)))
        if path.name != "test_layers.py" and GENERIC.search(path.read_text()):  # code in strings
            offenders.append(f"{path.relative_to(ROOT)} (in a string)")
    assert not offenders, offenders


GENERIC = re.compile(r"(?<!cudnn_rnn )\bimport bindings\b|\bfrom bindings[ .]")


def test_every_name_imported_from_the_project_exists():
    """Also in tools/ and in function bodies, which no CPU test may run: a moved name breaks
    here, not on the GPU machine."""
    import importlib
    missing = []
    for path in sorted(ROOT.glob("tools/**/*.py")) + sorted(ROOT.glob("tests/*.py")) + \
            sorted(MODULES.values()):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and not node.level and \
                    (node.module or "").startswith("cudnn_rnn"):
                names = _names_of(node.module)
                for alias in node.names:
                    if alias.name not in names and f"{node.module}.{alias.name}" not in MODULES:
                        missing.append(f"{path.relative_to(ROOT)}: {node.module}.{alias.name}")
    assert not missing, missing


OPTIONAL = ("torch",)  # what a module may need that the project does not install


def _names_of(module_name: str) -> set:
    """The names ``module_name`` defines: imported; where it needs an optional package that
    is absent (cudnn_rnn.torch.module needs PyTorch), those its source binds at top level."""
    import importlib
    try:
        return set(dir(importlib.import_module(module_name)))
    except ModuleNotFoundError as exc:
        if exc.name not in OPTIONAL:
            raise
    tree = ast.parse(MODULES[module_name].read_text())
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {t.id for t in targets if isinstance(t, ast.Name)}
    return names
