"""Builds the ALE C++ core (libale.a) from the ale-py source distribution, once, for setup.py.

The ale-py wheel ships the ROMs but no C++ headers or library; its sdist has the full C++
source with CMake. We pin the sdist to the installed ale-py version (ROMs and emulator then
come from the same release), check its sha256, apply rlfast's small source edits (PATCHES
below: none changes emulation), and build it under ``build/ale-<ver>/``:

    build/ale-<ver>/ale_py-<ver>.tar.gz   the sdist (pip download cache)
    build/ale-<ver>/src/                  extracted source
    build/ale-<ver>/cmake/                CMake build tree (libale.a lands here)

Environment variables:
    RLFAST_ALE_SDIST              path to a local ``ale_py-<ver>.tar.gz`` (offline machines)
    RLFAST_ALE_ALLOW_UNKNOWN_HASH 1: accept an ale-py version with no pinned hash below
    RLFAST_BUILD_JOBS             parallel build jobs (default: all cores)

The ALE source is a build input only; ``build/`` is git-ignored and never committed.
"""

from __future__ import annotations

import glob
import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tarfile
from dataclasses import dataclass, field

# sha256 of the ale-py sdists we have checked. Add a line when moving to a new ale-py.
SDIST_SHA256 = {
    "0.12.1": "c503d574c5983e1063b451201ccb779d935919c0f6bf116fb0f4f8aa4c86d249",
}


@dataclass
class AleBuild:
    """What setup.py needs to compile and link against the ALE core."""

    version: str
    include_dirs: list[str] = field(default_factory=list)
    extra_objects: list[str] = field(default_factory=list)
    libraries: list[str] = field(default_factory=list)


def installed_version() -> str:
    try:
        return importlib.metadata.version("ale-py")
    except importlib.metadata.PackageNotFoundError as e:
        raise RuntimeError(
            "rlfast builds Atari against the installed ale-py (ROMs and emulator must match); "
            "install it first: pip install ale-py"
        ) from e


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _fetch_sdist(version: str, cache: str) -> str:
    local = os.environ.get("RLFAST_ALE_SDIST")
    if local:
        if not os.path.isfile(local):
            raise RuntimeError(f"RLFAST_ALE_SDIST={local!r} is not a file")
        return local
    target = os.path.join(cache, f"ale_py-{version}.tar.gz")
    if not os.path.isfile(target):
        os.makedirs(cache, exist_ok=True)
        cmd = [sys.executable, "-m", "pip", "download", "--no-binary", "ale-py", "--no-deps",
               f"ale-py=={version}", "-d", cache]
        print("rlfast: fetching the ALE source:", " ".join(cmd), flush=True)
        # Inside pip's isolated build env, PYTHONPATH points at an overlay that hides the base
        # site-packages (and with it pip itself); the download runs with the base environment.
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONNOUSERSITE")}
        try:
            subprocess.run(cmd, check=True, env=env)
        except subprocess.CalledProcessError as e:
            raise RuntimeError(
                f"could not download the ale-py {version} sdist (offline?); point RLFAST_ALE_SDIST "
                f"at a local ale_py-{version}.tar.gz"
            ) from e
        if not os.path.isfile(target):
            found = glob.glob(os.path.join(cache, "ale_py-*.tar.gz"))
            raise RuntimeError(f"pip download did not produce {target} (found: {found})")
    return target


def _check_hash(path: str, version: str) -> None:
    digest = _sha256(path)
    pinned = SDIST_SHA256.get(version)
    if pinned is None:
        if os.environ.get("RLFAST_ALE_ALLOW_UNKNOWN_HASH") == "1":
            print(f"rlfast: WARNING: no pinned sha256 for ale-py {version}; using {digest}", flush=True)
            return
        raise RuntimeError(
            f"ale-py {version} has no pinned sha256 in build_tools/ale.py (known: {sorted(SDIST_SHA256)}). "
            f"Install a known ale-py, or add '{version}': '{digest}' to SDIST_SHA256 after checking it, "
            "or set RLFAST_ALE_ALLOW_UNKNOWN_HASH=1"
        )
    if digest != pinned:
        raise RuntimeError(f"sha256 mismatch for {path}: got {digest}, expected {pinned} (ale-py {version})")


def _extract(sdist: str, version: str, dest: str) -> str:
    src = os.path.join(dest, f"ale_py-{version}")
    if os.path.isfile(os.path.join(src, "CMakeLists.txt")):
        return src
    os.makedirs(dest, exist_ok=True)
    with tarfile.open(sdist) as tar:
        # Only the C++ build inputs; skip docs and the ROM copies (ROMs come from ale_py.roms).
        members = [
            m for m in tar.getmembers()
            if not ("/docs/" in m.name or m.name.endswith(".bin") or m.name.endswith(".gif"))
        ]
        tar.extractall(dest, members=members, filter="data")
    if not os.path.isfile(os.path.join(src, "CMakeLists.txt")):
        raise RuntimeError(f"{sdist} does not look like an ale-py sdist (no {src}/CMakeLists.txt)")
    return src


# Source edits applied to the extracted sdist: (file, original text, replacement, why). Each
# original must occur exactly once, so a new ale-py release fails loudly instead of silently
# building unpatched. Bump PATCH_LEVEL when this list changes: older builds are then redone.
PATCH_LEVEL = "1"
PATCHES = [
    # PhosphorBlend's tables (RGB averages and a 64^3 RGB->NTSC search: about 45 ms of CPU)
    # are only read when "color_averaging" is on, which rlfast never sets; ALE builds them in
    # the constructor of every StellaEnvironment, i.e. in every env and every reload of the
    # ROM (reseeding). Built on first use instead: make() of an Atari pool gets about twice
    # as fast and each env ~0.5 MB lighter (the tables' pages are never touched). Emulation
    # is unchanged (the frame-equality tests against ale-py and EnvPool check it).
    ("src/ale/environment/phosphor_blend.hpp",
     "  uint32_t m_avg_palette[256][256];",
     "  uint32_t m_avg_palette[256][256];\n  bool m_tables_ready = false;  // rlfast: built on first use"),
    ("src/ale/environment/phosphor_blend.cpp",
     "  m_phosphor_blend_ratio = 77;\n\n  makeAveragePalette();\n}",
     "  m_phosphor_blend_ratio = 77;\n}"),
    ("src/ale/environment/phosphor_blend.cpp",
     "void PhosphorBlend::process(ALEScreen& screen) {\n",
     "void PhosphorBlend::process(ALEScreen& screen) {\n"
     "  if (!m_tables_ready) {\n    makeAveragePalette();\n    m_tables_ready = true;\n  }\n"),
]


def _patch(src: str) -> None:
    for rel, old, new in PATCHES:
        path = os.path.join(src, rel)
        with open(path) as f:
            text = f.read()
        if text.count(old) != 1:
            raise RuntimeError(f"cannot apply rlfast's ALE patch to {rel}: expected text found "
                               f"{text.count(old)} times (a different ale-py release?)")
        with open(path, "w") as f:
            f.write(text.replace(old, new))


def _cmake_build(src: str, build: str) -> None:
    if shutil.which("cmake") is None:
        raise RuntimeError("building ALE needs cmake (and zlib headers): e.g. apt-get install cmake zlib1g-dev")
    jobs = int(os.environ.get("RLFAST_BUILD_JOBS", "0") or 0) or os.cpu_count() or 1
    # ALE's CMake turns on LTO, which writes compiler-specific bytecode objects that only an
    # LTO link can use. An LTO link of the extension measured no faster here (Pong, N=1) and
    # links much slower, so ALE is compiled to plain objects: IPO options emptied.
    os.makedirs(build, exist_ok=True)
    no_lto = os.path.join(build, "rlfast_no_lto.cmake")
    with open(no_lto, "w") as f:
        f.write('set(CMAKE_CXX_COMPILE_OPTIONS_IPO "")\n')
    configure = [
        "cmake", "-S", src, "-B", build,
        "-DBUILD_PYTHON_LIB=OFF", "-DSDL_SUPPORT=OFF", "-DBUILD_VECTOR_LIB=OFF",
        "-DCMAKE_BUILD_TYPE=Release", "-DCMAKE_POSITION_INDEPENDENT_CODE=ON",
        f"-DCMAKE_PROJECT_INCLUDE={no_lto}",
        # Hidden symbols: inside our shared extension, ALE's calls between its own functions
        # then bind directly (no PLT, and GCC may inline across -fPIC interposition points).
        "-DCMAKE_CXX_VISIBILITY_PRESET=hidden", "-DCMAKE_VISIBILITY_INLINES_HIDDEN=ON",
    ]
    print("rlfast: building the ALE C++ core (once; about a minute on 2 cores)", flush=True)
    subprocess.run(configure, check=True)
    subprocess.run(["cmake", "--build", build, "--target", "ale-lib", "--parallel", str(jobs)], check=True)


def build_ale(root: str) -> AleBuild:
    """Returns compile/link inputs for the ALE core, building it under root/build first if needed."""
    version = installed_version()
    base = os.path.join(root, "build", f"ale-{version}")
    build = os.path.join(base, "cmake")
    lib = os.path.join(build, "src", "ale", "libale.a")
    src = os.path.join(base, "src", f"ale_py-{version}")
    stamp = os.path.join(base, "rlfast_patch_level")
    current = os.path.isfile(stamp) and open(stamp).read().strip() == PATCH_LEVEL
    if not (current and os.path.isfile(lib) and os.path.isdir(src)):
        # Start from a clean extraction so patches apply to the original text exactly once.
        for stale in (os.path.join(base, "src"), build):
            shutil.rmtree(stale, ignore_errors=True)
        sdist = _fetch_sdist(version, base)
        _check_hash(sdist, version)
        src = _extract(sdist, version, os.path.join(base, "src"))
        _patch(src)
        _cmake_build(src, build)
        if not os.path.isfile(lib):
            raise RuntimeError(f"the ALE build finished without producing {lib}")
        with open(stamp, "w") as f:
            f.write(PATCH_LEVEL + "\n")
    return AleBuild(
        version=version,
        include_dirs=[os.path.join(src, "src"), os.path.join(src, "src", "ale"), os.path.join(build, "src", "ale")],
        extra_objects=[lib],
        libraries=["z"],
    )


if __name__ == "__main__":
    print(build_ale(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
