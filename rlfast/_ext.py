"""The one module that loads the engine, ``rlfast._C``; every other module takes ``_C`` from here.

``_C`` links libmujoco by soname, so MuJoCo's shared library is loaded first (``rlfast/_mujoco.py`` says
why); then the extension, with a clearer error when it was built against another MuJoCo; then a check
that the loaded libmujoco is the one ``_C`` was compiled with.
"""

from rlfast import _mujoco

_mujoco.preload_library()  # before _C, which links libmujoco
try:
    from rlfast import _C
except ImportError as e:
    raise _mujoco.explain_import_error(e) from e
_mujoco.check_version(_C)

__all__ = ["_C"]
