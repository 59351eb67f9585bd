"""Finds the MuJoCo headers and shared library shipped in the installed ``mujoco-core`` wheel.

The wheel (a dependency of ``mujoco``) installs ``mujoco/include/mujoco/*.h`` and
``mujoco/libmujoco.so.X.Y.Z`` into site-packages. The extension compiles against those
headers and links that exact file, so its DT_NEEDED entry is the library's soname
(``libmujoco.so.X.Y.Z``, full version: MuJoCo's struct layouts change between releases).

How the library is found at run time: ``pip install`` builds in an isolated environment that
is deleted afterwards, so an absolute rpath into the build-time wheel would dangle, and an
``$ORIGIN``-relative one only works for a non-editable install into the same site-packages.
Instead ``rlfast/_mujoco.py`` loads the runtime wheel's ``libmujoco.so.*`` by absolute path
(ctypes) before ``rlfast._C`` is imported; the dynamic loader then satisfies ``_C``'s
DT_NEEDED with the already-loaded object (matched by soname). The runtime wheel is pinned to
the build-time version in pyproject.toml, and ``_C`` checks ``mj_version()`` against the
header it was compiled with when it is imported. ``$ORIGIN/../mujoco`` is still added as an
rpath, a fallback for a regular install that imports ``rlfast._C`` directly.
"""

from __future__ import annotations

import glob
import os
import sys
from importlib import metadata


def _package_dirs() -> list[str]:
    """Candidate ``.../site-packages/mujoco`` folders, the mujoco-core wheel's own first."""
    dirs = []
    try:
        files = metadata.distribution("mujoco-core").files or []
        for f in files:
            if str(f).endswith("include/mujoco/mujoco.h"):
                dirs.append(os.path.dirname(os.path.dirname(os.path.dirname(str(f.locate())))))
    except metadata.PackageNotFoundError:
        pass
    dirs += [os.path.join(p, "mujoco") for p in sys.path if p]
    return dirs


def find() -> tuple[str, str]:
    """Returns ``(include_dir, library_path)`` of the installed MuJoCo, or raises."""
    for d in _package_dirs():
        header = os.path.join(d, "include", "mujoco", "mujoco.h")
        libs = sorted(glob.glob(os.path.join(d, "libmujoco.so.*")))
        if os.path.isfile(header) and libs:
            return os.path.join(d, "include"), libs[-1]
    raise RuntimeError(
        "building rlfast needs MuJoCo's headers and libmujoco.so from the 'mujoco-core' wheel "
        "(pip install mujoco-core, the version pinned in pyproject.toml)"
    )


def extension_kwargs() -> dict[str, list]:
    """Sources, include dirs and link arguments for the MuJoCo part of ``rlfast._C``."""
    include_dir, library = find()
    return {
        "sources": sorted(glob.glob("rlfast/csrc/envs/mujoco/*.cc")),
        "include_dirs": [include_dir],
        # Link the file itself (its soname becomes DT_NEEDED): the wheel has no libmujoco.so link.
        "extra_link_args": [library, "-Wl,-rpath,$ORIGIN/../mujoco"],
    }
