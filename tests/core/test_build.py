"""How rlfast._C is linked."""

import shutil
import subprocess

import pytest

import rlfast._C


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
