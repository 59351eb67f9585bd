"""Builds the rlfast._C extension (C++17, pybind11). Metadata lives in pyproject.toml."""

import glob
import os
import sys

from pybind11.setup_helpers import ParallelCompile, Pybind11Extension, build_ext
from setuptools import setup

# Compile translation units in parallel (RLFAST_BUILD_JOBS overrides; 0 = all cores).
ParallelCompile("RLFAST_BUILD_JOBS", default=0).install()

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from build_tools import mujoco  # noqa: E402  (needs HERE on sys.path under build isolation)

MUJOCO = mujoco.extension_kwargs()


def sources() -> list[str]:
    files = glob.glob("rlfast/csrc/core/*.cc") + glob.glob("rlfast/csrc/python/*.cc")
    return sorted(files)


def macros() -> list[tuple[str, str]]:
    # Test-only state export (get_state/set_state used by alignment tests). On by default so
    # `pip install -e .` can run the test suite; RLFAST_TEST_HOOKS=0 builds without it.
    if os.environ.get("RLFAST_TEST_HOOKS", "1") != "0":
        return [("RLFAST_TEST_HOOKS", "1")]
    return []


ext = Pybind11Extension(
    "rlfast._C",
    sources() + MUJOCO["sources"],
    include_dirs=[HERE, *MUJOCO["include_dirs"]],
    define_macros=macros(),
    cxx_std=17,
    extra_compile_args=["-O3", "-Wall", "-Wextra", "-fvisibility=hidden"],
    extra_link_args=["-pthread", *MUJOCO["extra_link_args"]],
)

setup(ext_modules=[ext], cmdclass={"build_ext": build_ext})
