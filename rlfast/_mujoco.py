"""MuJoCo glue on the Python side: load libmujoco before ``rlfast._C``, resolve model files.

``rlfast._C`` links ``libmujoco.so.X.Y.Z`` by soname without a usable rpath (see
build_tools/mujoco.py for why). ``preload_library`` loads that file from the installed
``mujoco`` wheel by absolute path, so the dynamic loader finds it already loaded when ``_C``
is imported. ``check_version`` then compares the loaded library with the headers ``_C`` was
compiled against.
"""

from __future__ import annotations

import ctypes
import glob
import os
from importlib import util
from typing import Any

_HANDLE = None


def _package_dir(name: str) -> str | None:
    spec = util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        return None
    return list(spec.submodule_search_locations)[0]


def preload_library() -> None:
    """Loads the installed wheel's libmujoco.so.* (idempotent). Call before importing _C."""
    global _HANDLE
    if _HANDLE is not None:
        return
    pkg = _package_dir("mujoco")
    libs = sorted(glob.glob(os.path.join(pkg, "libmujoco.so.*"))) if pkg else []
    if not libs:
        raise ImportError(
            "rlfast needs the 'mujoco' package (libmujoco.so.*): pip install the mujoco version rlfast pins"
        )
    _HANDLE = ctypes.CDLL(libs[-1])


def explain_import_error(err: ImportError) -> ImportError:
    """A clearer error when _C cannot find the libmujoco it was built against."""
    if "libmujoco" not in str(err):
        return err
    pkg = _package_dir("mujoco")
    found = [os.path.basename(p) for p in glob.glob(os.path.join(pkg or "", "libmujoco.so.*"))]
    return ImportError(
        f"rlfast._C was built against another MuJoCo than the installed one ({found or 'none'}): "
        f"install the mujoco version rlfast pins, or rebuild rlfast ({err})"
    )


def check_version(c_module: Any) -> None:
    """Raises ImportError if the loaded libmujoco differs from the one _C was compiled with."""
    mismatch = c_module.mujoco_version_mismatch()
    if mismatch:
        raise ImportError(mismatch)


def assets_dir() -> str:
    """gymnasium's MuJoCo model folder (found without importing gymnasium.envs.mujoco)."""
    pkg = _package_dir("gymnasium")
    if pkg is None:
        raise ImportError("rlfast's MuJoCo tasks read their models from gymnasium: pip install gymnasium")
    return os.path.join(pkg, "envs", "mujoco", "assets")


def resolve_xml_file(defaults: dict, env_kwargs: dict) -> dict:
    """Returns ``env_kwargs`` with ``xml_file`` an absolute path, as gymnasium's MujocoEnv
    resolves it: paths starting with '/' or '.' as given, '~' expanded, bare names under
    gymnasium's assets folder."""
    out = dict(env_kwargs)
    name = out.get("xml_file", defaults["xml_file"])
    if not isinstance(name, str):
        raise ValueError(f"xml_file must be a str, got {name!r}")
    if name.startswith("~"):
        path = os.path.expanduser(name)
    elif name.startswith((".", "/")):
        path = name
    else:
        path = os.path.join(assets_dir(), name)
    if not os.path.exists(path):
        raise OSError(f"File {path} does not exist")
    out["xml_file"] = os.path.abspath(path)
    return out
