"""The task registry: every task id ``rlfast.make`` takes, and which kind of pool runs it.

Three sources, one lookup (``task_family``) behind ``rlfast.make``, ``list_envs`` and ``task_family``:

- the engine's own C++ tasks (``_C.list_tasks()``: classic control, Atari, MuJoCo, and the ``testing``
  family), families as the engine names them;
- C++ envs compiled at run time by ``rlfast.load_env`` (``rlfast/loader.py`` registers each module here),
  family ``"custom"``; ``"path/my_env.h:MyEnv-v0"`` names one by its header before it is loaded;
- gymnasium ids in their module form ``"module:Env-v0"``, family ``"python"``: Python envs in worker
  processes (``rlfast/procpool.py``).
"""

from __future__ import annotations

import difflib
from types import ModuleType
from typing import Any, Optional

import gymnasium as gym

from rlfast._ext import _C

_LOADED: dict[str, ModuleType] = {}
"""task id -> the module ``rlfast.load_env`` compiled for it"""


def is_builtin(task_id: Any) -> bool:
    """Whether ``task_id`` is one of the engine's own tasks."""
    return isinstance(task_id, str) and task_id in _C.list_tasks()


def register(task_id: str, module: ModuleType) -> None:
    """Registers ``module`` (compiled by ``rlfast.load_env``, which checked the id) as the task ``task_id``."""
    _LOADED[task_id] = module


def loaded(task_id: Any) -> Optional[ModuleType]:
    """The module of a task ``load_env`` registered, else None."""
    return _LOADED.get(task_id) if isinstance(task_id, str) else None


def header_task(task_id: Any) -> Optional[tuple[str, str]]:
    """``("path/my_env.h", "MyEnv-v0")`` for an id of the form ``path/my_env.h:MyEnv-v0``, else None."""
    if not isinstance(task_id, str):
        return None
    header, sep, name = task_id.rpartition(":")
    if sep and header.endswith((".h", ".hpp", ".hh")) and name:
        return header, name
    return None


def is_custom(task_id: Any) -> bool:
    """Whether ``task_id`` names a C++ env of ``load_env``: loaded already, or ``path/my_env.h:MyEnv-v0``."""
    return header_task(task_id) is not None or loaded(task_id) is not None


def list_envs(include_testing: bool = False) -> list[str]:
    """All task ids this build can make (the ``testing`` family only when asked), then those ``load_env``
    registered."""
    own = [t for t in _C.list_tasks() if include_testing or _C.task_family(t) != "testing"]
    return own + sorted(_LOADED)


def check_task_id(task_id: Any) -> None:
    """Raises ValueError unless ``task_id`` is an engine task, suggesting close names."""
    if not isinstance(task_id, str):
        raise ValueError(f"task_id must be a string such as 'CartPole-v1', got {task_id!r}")
    known = _C.list_tasks()
    if task_id in known:
        return
    close = difflib.get_close_matches(task_id, known, n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    if task_id in gym.registry:
        hint += f" ({task_id} is a gymnasium id: 'gymnasium:{task_id}' runs it as Python envs in worker processes)"
    raise ValueError(f"unknown task id {task_id!r}{hint} (rlfast.list_envs() lists them all; a gymnasium id, or "
                     "'module:Env-v0', runs as Python envs in worker processes)")


def is_python_task(task_id: Any) -> bool:
    """Whether ``rlfast.make`` runs ``task_id`` as Python envs in worker processes (``rlfast/procpool.py``): a
    gymnasium id in its ``"module:Env-v0"`` form (gymnasium imports the module first; ``"gymnasium:Env-v0"``
    for gymnasium's own envs). A bare gymnasium id is refused with that hint, so that a typo of an engine task
    never silently becomes a slower Python env."""
    if not isinstance(task_id, str) or is_builtin(task_id) or is_custom(task_id):
        return False
    return ":" in task_id


def task_family(task_id: Any) -> str:
    """The family of a task id: "classic_control", "atari", "mujoco", "python" (a gymnasium id run in worker
    processes), "custom" (a C++ env of rlfast.load_env, or ``path/my_env.h:MyEnv-v0``; or "testing");
    ValueError if unknown."""
    if is_python_task(task_id):
        return "python"
    if is_custom(task_id):
        return "custom"
    check_task_id(task_id)
    return _C.task_family(task_id)
