"""Keeps the extension's object files between builds, so a build compiles only what changed.

setuptools compiles ``rlfast._C`` into a temporary folder under ``pip install -e .`` and into ``build/temp.*``
under ``python -m build``, so each build compiled every translation unit (about 1.8 CPU-minutes), and CI, which
does both (``.ci/run`` then ``.ci/wheel``), compiled them twice. Here the objects go to
``build/objects-<key>/``, where the key is a hash of everything the same source would compile differently
with: the compiler's command line and version, the extension's flags, macros and include folders (a folder
outside the checkout, such as the isolated build environment's pybind11 or mujoco-core, by the version of its
package, since its path changes on every build), and this Python. An object is compiled again when it is
missing or older than its source or than any header the extension lists in ``depends`` or finds in its
include folders under the checkout (rlfast's own headers, ALE's). Anything else that changes the output
changes the key, so a stale object is never linked.
"""

from __future__ import annotations

import glob
import hashlib
import os
import subprocess
import sys
import sysconfig
from importlib import metadata

HEADERS = ("*.h", "*.hpp", "*.hxx", "*.hh", "*.ins")


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "-"


def _portable(arg: str, root: str) -> str:
    """An argument as it goes into the key: a path inside the checkout as is, one outside it replaced by a
    marker (the versions of the packages it comes from are in the key)."""
    for prefix in ("-isystem", "-I", ""):
        if arg.startswith(prefix) and os.path.isabs(arg[len(prefix):]):
            path = arg[len(prefix):]
            inside = os.path.commonpath([os.path.abspath(path), root]) == root
            return arg if inside else prefix + "<outside>"
    return arg


def key(compiler_so: list[str], ext, root: str) -> str:
    """The hash of what an object of ``ext`` depends on besides its source and headers."""
    try:
        version = subprocess.run([compiler_so[0], "--version"], capture_output=True, text=True).stdout
    except OSError:
        version = "?"
    parts = [
        *compiler_so, version,
        *(_portable(a, root) for a in ext.extra_compile_args),
        *(f"{m[0]}={m[1] if len(m) > 1 else ''}" for m in ext.define_macros), *ext.undef_macros,
        *(_portable("-I" + d, root) for d in ext.include_dirs),
        f"pybind11={_version('pybind11')}", f"mujoco-core={_version('mujoco-core')}", f"ale-py={_version('ale-py')}",
        sys.version, str(sysconfig.get_config_var("EXT_SUFFIX")),
    ]  # fmt: skip
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def headers(ext, root: str) -> list[str]:
    """The headers an object may include that can change inside the checkout: ``ext.depends`` and every header
    under its include folders (``-I`` and ``-isystem``) that lie in the checkout."""
    dirs = list(ext.include_dirs)
    args = list(ext.extra_compile_args)
    dirs += [b for a, b in zip(args, args[1:]) if a == "-isystem"] + [a[2:] for a in args if a.startswith("-I")]
    found = {d for d in ext.depends if not d.endswith((".a", ".so"))}
    for d in dirs:
        d = os.path.abspath(d)
        if os.path.isdir(d) and os.path.commonpath([d, root]) == root and d != root:
            for pattern in HEADERS:
                found.update(glob.glob(os.path.join(d, "**", pattern), recursive=True))
    return sorted(found)


class Stale:
    """``ParallelCompile``'s ``needs_recompile(obj, src)``: an object older than its source or any header."""

    def __init__(self) -> None:
        self.newest_header = 0.0

    def watch(self, paths: list[str]) -> None:
        self.newest_header = max([os.path.getmtime(p) for p in paths if os.path.exists(p)], default=0.0)

    def __call__(self, obj: str, src: str) -> bool:
        built = os.path.getmtime(obj)
        return built < os.path.getmtime(src) or built < self.newest_header
