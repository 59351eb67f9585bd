"""The trainer scripts (``scripts/*.py``) for the benchmarks that reuse a trainer's pieces (its ``Args``, agent or
Q-network) or run it: imported by file path, without touching ``sys.path``."""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
"""the repository"""
SCRIPTS = ROOT / "scripts"
"""the trainers' folder"""


def load_trainer(name: str) -> ModuleType:
    """``scripts/<name>`` (e.g. ``"ppo_atari.py"``) as a module named by its stem, registered in ``sys.modules`` (as
    tyro and dataclasses need); the same module again if it is loaded already."""
    path = SCRIPTS / name
    loaded = sys.modules.get(path.stem)
    if loaded is not None and getattr(loaded, "__file__", None) == str(path):
        return loaded
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module
