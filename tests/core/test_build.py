"""How rlfast._C is linked."""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

import rlfast._C
from rlfast import _mujoco

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.wheel
@pytest.mark.skipif(shutil.which("nm") is None, reason="needs binutils' nm")
def test_static_libraries_stay_inside_the_extension():
    """Nothing from a static archive is exported: not ALE's classes (libale.a), not libstdc++'s locale and
    stream machinery where a toolchain links libstdc++ statically. Exported, they bind at load time to the
    copies already loaded (torch loads libstdc++.so into the global scope), and a static libstdc++ reading
    another version's locale data crashed the first std::ifstream read (the GPU machine, whose g++ links
    libstdc++ statically). Before the fix this build exported ALE symbols (``_ZN3ale...``)."""
    out = subprocess.run(["nm", "-D", "--defined-only", rlfast._C.__file__], capture_output=True, text=True,
                         check=True).stdout  # fmt: skip
    names = [line.split()[-1] for line in out.splitlines() if line.strip()]
    assert "PyInit__C" in names
    leaked = [n for n in names if n.startswith(("_ZN3ale", "_ZNSt6locale", "_ZNSt8ios_base", "_ZNKSt7codecvt",
                                                 "_ZNSt7codecvt", "_ZSt4cout", "_ZNSi", "_ZNSo"))]  # fmt: skip
    assert not leaked, leaked[:10]


@pytest.mark.wheel
@pytest.mark.skipif(shutil.which("readelf") is None, reason="needs binutils' readelf")
def test_the_extension_names_libmujoco_by_soname_and_no_build_path():
    """A wheel built anywhere runs anywhere: ``_C`` needs libmujoco by soname, its only search path is relative
    (``$ORIGIN/../mujoco``: the installed mujoco package beside rlfast), and no path of the machine that built it
    (the checkout, pip's temporary build environment) is left in the binary. The libmujoco this process maps
    is the installed mujoco package's (``rlfast/_mujoco.py`` loads it before ``_C``)."""
    out = subprocess.run(["readelf", "-d", rlfast._C.__file__], capture_output=True, text=True, check=True).stdout
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+)\]", out)
    assert [n for n in needed if n.startswith("libmujoco.so.")], needed
    assert re.findall(r"\((?:RUNPATH|RPATH)\)\s+Library r(?:un)?path: \[(.+)\]", out) == ["$ORIGIN/../mujoco"], out
    binary = Path(rlfast._C.__file__).read_bytes()
    assert str(ROOT).encode() not in binary and b"build-env" not in binary
    mapped = {line.split()[-1] for line in Path("/proc/self/maps").read_text().splitlines() if "libmujoco.so" in line}
    package = _mujoco._package_dir("mujoco")
    assert mapped and all(os.path.dirname(m) == os.path.realpath(package) for m in mapped), (mapped, package)
