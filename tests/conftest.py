"""Shared fixtures and markers."""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def load_script():
    """``load_script("bench_dqn.py")``: a script of ``scripts/`` imported as a module (registered in
    sys.modules, as tyro and dataclasses need), with ``scripts/`` importable as when it runs."""
    scripts = Path(__file__).resolve().parents[1] / "scripts"

    def load(name: str) -> ModuleType:
        if str(scripts) not in sys.path:
            sys.path.insert(0, str(scripts))
        spec = importlib.util.spec_from_file_location(name[:-3], scripts / name)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module

    return load
