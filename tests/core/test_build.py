"""How rlfast._C is linked."""

import os
import re
import shutil
import subprocess
import sys
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


def _objects():
    """build_tools/objects.py, the build's object cache (a build input: not in the wheel, not on sys.path)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("rlfast_build_objects", ROOT / "build_tools" / "objects.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _ext(root: Path, env: str, **change):
    from types import SimpleNamespace

    fields = dict(extra_compile_args=["-O3", "-isystem", str(root / "build" / "ale" / "src")],
                  define_macros=[("RLFAST_TEST_HOOKS", "1")], undef_macros=[],
                  include_dirs=[str(root), f"/tmp/pip-build-env-{env}/overlay/lib/site-packages/pybind11/include"],
                  depends=[])  # fmt: skip
    fields.update(change)
    return SimpleNamespace(**fields)


def test_the_object_folder_key_ignores_the_build_environments_path_and_follows_every_flag(tmp_path):
    """pip builds in a new temporary environment each time: its path must not change the key, or CI's wheel
    would compile again what its editable install compiled; a flag, a macro or a folder in the checkout must."""
    objects = _objects()
    cc = [sys.executable]  # a program whose --version answers
    base = objects.key(cc, _ext(tmp_path, "a1"), str(tmp_path))
    assert objects.key(cc, _ext(tmp_path, "b2"), str(tmp_path)) == base
    assert objects.key(cc, _ext(tmp_path, "a1", define_macros=[]), str(tmp_path)) != base
    assert objects.key(cc, _ext(tmp_path, "a1", extra_compile_args=["-O2"]), str(tmp_path)) != base
    other = ["-O3", "-isystem", str(tmp_path / "build" / "ale-2" / "src")]
    assert objects.key(cc, _ext(tmp_path, "a1", extra_compile_args=other), str(tmp_path)) != base
    assert objects.key([*cc, "-fPIC"], _ext(tmp_path, "a1"), str(tmp_path)) != base


def test_an_object_is_compiled_again_when_older_than_its_source_or_any_header(tmp_path):
    """The headers watched are the extension's depends and those under its include folders inside the
    checkout (ALE's), not the checkout's root or folders outside it."""
    objects = _objects()
    ale = tmp_path / "build" / "ale" / "src"
    (ale / "emucore").mkdir(parents=True)
    for name in ("emucore/M6502Hi.ins", "ale_interface.hpp"):
        (ale / name).write_text("")
    (tmp_path / "own.h").write_text("")
    (tmp_path / "stray.h").write_text("")
    ext = _ext(tmp_path, "a1", depends=[str(tmp_path / "own.h"), str(tmp_path / "libale.a")])
    watched = objects.headers(ext, str(tmp_path))
    assert watched == sorted([str(ale / "ale_interface.hpp"), str(ale / "emucore" / "M6502Hi.ins"),
                              str(tmp_path / "own.h")])  # fmt: skip

    src, obj = tmp_path / "a.cc", tmp_path / "a.o"
    src.write_text("")
    obj.write_text("")
    for path, when in ((src, 100), (obj, 200), *((Path(h), 50) for h in watched)):
        os.utime(path, (when, when))
    stale = objects.Stale()
    stale.watch(watched)
    assert not stale(str(obj), str(src))
    os.utime(src, (300, 300))
    assert stale(str(obj), str(src))
    os.utime(src, (100, 100))
    os.utime(ale / "emucore" / "M6502Hi.ins", (300, 300))
    stale.watch(watched)
    assert stale(str(obj), str(src))
