"""Builds the rlfast._C extension (C++17, pybind11). Metadata lives in pyproject.toml."""

import glob
import os
import sys

from pybind11.setup_helpers import ParallelCompile, Pybind11Extension, build_ext
from setuptools import setup

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from build_tools import mujoco, objects  # noqa: E402  (needs HERE on sys.path under build isolation)
from build_tools.ale import build_ale  # noqa: E402

# Compile translation units in parallel (RLFAST_BUILD_JOBS overrides; 0 = all cores), each only when its object
# in build/objects-<key>/ is missing or older than its source or a header (build_tools/objects.py).
STALE = objects.Stale()
ParallelCompile("RLFAST_BUILD_JOBS", default=0, needs_recompile=STALE).install()

MUJOCO = mujoco.extension_kwargs()


def sources() -> list[str]:
    files = glob.glob("rlfast/csrc/core/*.cc") + glob.glob("rlfast/csrc/python/*.cc")
    files += glob.glob("rlfast/csrc/ops/*.cc")
    files += glob.glob("rlfast/csrc/envs/atari/*.cc")
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
    depends=sorted(glob.glob("rlfast/csrc/**/*.h", recursive=True)),  # rebuild when a header changes
    include_dirs=[HERE, *MUJOCO["include_dirs"]],
    define_macros=macros(),
    cxx_std=17,
    extra_compile_args=["-O3", "-Wall", "-Wextra", "-fvisibility=hidden"],
    # --exclude-libs: symbols from static archives (libale.a; libstdc++.a where a toolchain links it
    # statically) stay inside _C. Exported, they bind to the copies torch loads globally (its libstdc++.so),
    # and a static libstdc++ mixed with another version's locale data crashed the first std::ifstream read
    # (seen on the GPU machine, whose g++ links libstdc++ statically).
    extra_link_args=["-pthread", "-Wl,--exclude-libs,ALL", *MUJOCO["extra_link_args"]],
)

class BuildExt(build_ext):
    """Builds ALE's C++ core first (once, cached under build/; see build_tools/ale.py), then the extension's
    objects that changed (build_tools/objects.py)."""

    def build_extensions(self) -> None:
        # An interpreter built with a shared libpython may put -Wl,-rpath,<its lib folder> into the link command
        # (pyenv's 3.13 does, in LDCXXSHARED): a path of the build machine in _C's RUNPATH, which a wheel must not
        # carry (tests/core/test_build.py). _C needs no libpython (the interpreter provides its symbols), so only
        # the extension's own rpath (extra_link_args: $ORIGIN/../mujoco) stays.
        for attr in ("linker_so", "linker_so_cxx"):
            command = getattr(self.compiler, attr, None)
            if command:
                setattr(self.compiler, attr, [a for a in command if not a.startswith("-Wl,-rpath,")])
        ale = build_ale(HERE)
        for e in self.extensions:
            # -isystem: ALE's headers are not ours to warn about.
            e.extra_compile_args += [f for d in ale.include_dirs for f in ("-isystem", d)]
            e.extra_objects += ale.extra_objects
            e.depends += ale.extra_objects  # relink when libale.a is rebuilt (e.g. new patches)
            e.libraries += ale.libraries
            # Bit-exact frame resize: no fused multiply-add contraction on any target.
            e.extra_compile_args += ["-ffp-contract=off"]
        # One object folder per compile configuration, kept between builds (pip's editable build would put the
        # objects in a temporary folder): a rebuild, or CI's wheel after its editable install, compiles only
        # what changed. objects.key says what the configuration is.
        (e,) = self.extensions
        self.build_temp = os.path.join(HERE, "build", f"objects-{objects.key(self.compiler.compiler_so, e, HERE)}")
        STALE.watch(objects.headers(e, HERE))
        super().build_extensions()


setup(ext_modules=[ext], cmdclass={"build_ext": BuildExt})
