"""The package's import graph: no circles inside ``rlfast/``, ``_C`` loaded in one place, every module importable
on its own.

The rule of the circle check: the nodes are the Python modules under ``rlfast/`` (``rlfast.algos`` included);
an edge is any ``import``/``from ... import`` of an ``rlfast`` module anywhere in a module's file, at the top or
inside a function alike (a lazy import only hides a circle until the function runs, so it counts too).
``from rlfast.x import name`` is an edge to ``rlfast.x.name`` where that is a module, else to ``rlfast.x``; a
relative import is resolved first. The import of a module's parent packages that Python does implicitly (it
runs ``rlfast/__init__.py`` before any submodule) is no edge: it is the package, not a circle in the code.
"""

import ast
import importlib.machinery
import json
import subprocess
import sys
from pathlib import Path
from typing import Optional

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "rlfast"


def module_files(package: Path) -> dict[str, Path]:
    """Dotted module name -> file for every Python module under ``package`` (a package: its ``__init__.py``)."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def submodules(package: Path) -> set[str]:
    """Every importable module name under ``package``: the Python modules and the compiled extensions."""
    names = set(module_files(package))
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        for path in package.rglob(f"*{suffix}"):
            names.add(".".join(path.relative_to(package.parent).parts)[: -len(suffix)])
    return names


def _known(name: str, modules: set[str]) -> Optional[str]:
    """The longest module in ``modules`` that ``name`` is or lies inside, else None (a module outside)."""
    parts = name.split(".")
    for n in range(len(parts), 0, -1):
        if ".".join(parts[:n]) in modules:
            return ".".join(parts[:n])
    return None


def imported(name: str, path: Path, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that module ``name`` (file ``path``) imports, at any depth of its code."""
    out = set()
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the package holding this module, up level - 1 packages
                package = name.split(".") if is_package else name.split(".")[:-1]
                anchor = package[: len(package) - (node.level - 1)]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        out.update(t for t in (_known(t, modules) for t in targets) if t is not None)
    return out


def import_graph(package: Path) -> dict[str, set[str]]:
    """Module -> the package's modules it imports (extension modules are leaves, not nodes)."""
    modules = submodules(package)
    return {name: imported(name, path, modules) for name, path in module_files(package).items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The circles a depth-first search meets (one per edge back into the search path), each as the modules
    in import order, the first repeated at the end."""
    found, state, path = [], {}, []  # state: 1 on the search path, 2 done

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                found.append(path[path.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return found


def test_no_import_circle_inside_the_package():
    graph = import_graph(PACKAGE)
    assert {"rlfast", "rlfast.pool", "rlfast.registry", "rlfast.algos.run"} <= set(graph)
    assert "rlfast.pool" in graph["rlfast.loader"] and "rlfast.registry" in graph["rlfast.loader"]
    found = cycles(graph)
    assert not found, "import circles in rlfast/:\n" + "\n".join(" -> ".join(c) for c in found)


def test_the_circle_check_finds_lazy_and_relative_circles(tmp_path):
    """The check itself: a circle closed by a function-level import, or by a relative import, is named."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from pkg.a import f\n")
    (pkg / "a.py").write_text("import os\n\ndef f():\n    from pkg.sub import b\n    return b\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "b.py").write_text("from .. import a\n")
    (pkg / "c.py").write_text("from pkg import a, sub\n")  # no circle: nothing imports c
    graph = import_graph(pkg)
    assert graph["pkg.sub.b"] == {"pkg.a"} and graph["pkg.c"] == {"pkg.a", "pkg.sub"}
    assert cycles(graph) == [["pkg.a", "pkg.sub.b", "pkg.a"]]


def test_only_the_ext_module_imports_the_engine():
    """``rlfast._C`` needs MuJoCo's library loaded first (rlfast/_mujoco.py): one module does both."""
    importers = sorted(name for name, deps in import_graph(PACKAGE).items() if "rlfast._C" in deps)
    assert importers == ["rlfast._ext"]


# Each module imported first in an interpreter of its own: a child forked from one interpreter that has loaded
# torch and numpy (the third-party modules nearly every module needs) and no module of this package, so each child
# pays for its own modules only: 8 s for all 45 on a quiet 2-core AVX2 EPYC, where 45 fresh interpreters, each
# importing torch again, took 404 s beside two training runs.
IMPORT_EACH = r"""
import json, os, sys, traceback
import numpy, torch
loaded = sorted(m for m in sys.modules if m.split(".")[0] in set(n.split(".")[0] for n in sys.argv[1:]))
assert not loaded, f"loaded before the fork: {loaded}"
out = {}
for name in sys.argv[1:]:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            __import__(name)
            code = 0
        except BaseException:
            os.write(write, traceback.format_exc().encode())
            code = 1
        os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        error = f.read().decode()
    _, status = os.waitpid(pid, 0)
    out[name] = [os.waitstatus_to_exitcode(status), error]
print(json.dumps(out))
"""


def import_each_alone(modules: list[str], cwd: Path) -> dict[str, tuple[int, str]]:
    """Module -> (exit code, traceback) of importing it first in a fresh child (see IMPORT_EACH)."""
    proc = subprocess.run([sys.executable, "-c", IMPORT_EACH, *modules], capture_output=True, text=True, cwd=cwd,
                          timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return {name: tuple(result) for name, result in json.loads(proc.stdout.splitlines()[-1]).items()}


@pytest.fixture(scope="module")
def imported_alone() -> dict[str, tuple[int, str]]:
    return import_each_alone(sorted(module_files(PACKAGE)), ROOT)


@pytest.mark.parametrize("module", sorted(module_files(PACKAGE)))
def test_each_module_imports_alone(module, imported_alone):
    """Imported first, in a child holding no module of rlfast yet, each module loads (an import circle fails here at
    its first step)."""
    code, error = imported_alone[module]
    assert code == 0, error


def test_the_import_check_names_a_module_that_fails_only_when_imported_first(tmp_path):
    """The check itself: ``pkg.a`` imported first meets ``pkg.b`` asking for ``pkg.a``'s name before it is set (a
    circle at import time) and fails, while ``pkg.b`` imported first loads both; in one interpreter importing
    ``pkg.b`` and then ``pkg.a``, both would pass. Each child starts clean of ``pkg``."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg import b\nVALUE = 1\n")
    (pkg / "b.py").write_text("from pkg.a import VALUE\n")
    result = import_each_alone(["pkg.b", "pkg.a"], tmp_path)
    assert result["pkg.b"] == (0, "")
    assert result["pkg.a"][0] == 1 and "ImportError: cannot import name 'VALUE'" in result["pkg.a"][1]
    (pkg / "a.py").write_text("VALUE = 1\n")  # the circle broken
    assert import_each_alone(["pkg.b", "pkg.a"], tmp_path) == {"pkg.a": (0, ""), "pkg.b": (0, "")}
