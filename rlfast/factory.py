"""The pool factories of the public API: ``rlfast.make`` (dispatch by task family, ``rlfast/registry.py``),
``load_env``, ``make_from`` and ``make_gymnasium``.

``rlfast/loader.py`` and ``rlfast/procpool.py`` are imported when first needed, so that ``import rlfast`` does
not pay for the compiler driver or the worker processes' machinery.
"""

from typing import Any, Optional

from rlfast import registry
from rlfast.gym_adapter import GymnasiumVectorEnv
from rlfast.pool import EnvPool


def make(
    task_id: str,
    num_envs: int,
    batch_size: Optional[int] = None,
    num_threads: Optional[int] = None,
    seed: int = 0,
    **kwargs: Any,
) -> EnvPool:
    """Creates a pool of ``num_envs`` envs of ``task_id`` (see ``list_envs()``).

    ``batch_size`` < ``num_envs`` selects async mode; ``num_threads`` defaults to
    min(cores, num_envs). Other keywords: ``seeds``, ``max_episode_steps``,
    ``autoreset_mode`` ("next_step" | "same_step"), ``thread_affinity_offset``,
    ``work_in_recv`` (recv() steps envs on the calling thread while it waits; see EnvPool),
    ``pin_memory``, and the env's own options (e.g. ``sutton_barto_reward``).

    A gymnasium id in its module form (``"my_pkg:MyEnv-v0"``, ``"gymnasium:LunarLander-v3"``) makes a
    ``ProcessEnvPool``: ``gymnasium.make(task_id, **kwargs)`` in
    ``num_threads`` (or ``num_workers``) worker processes (default: one per core); see ``rlfast/procpool.py``.
    """
    if (header := registry.header_task(task_id)) is not None:  # "path/my_env.h:MyEnv-v0"
        task_id = load_env(*header)
    family = registry.task_family(task_id)  # ValueError for an unknown id
    if family == "custom":
        from rlfast.loader import make_loaded

        return make_loaded(task_id, num_envs, batch_size=batch_size, num_threads=num_threads, seed=seed, **kwargs)
    if family == "python":
        from rlfast.procpool import make_gymnasium as make_python

        if "num_workers" in kwargs:  # the process pool's own name for num_threads
            workers = kwargs.pop("num_workers")
            if num_threads is not None and workers != num_threads:
                raise ValueError(f"num_threads={num_threads} and num_workers={workers} both set the worker processes "
                                 f"of {task_id!r}; give one")  # fmt: skip
            num_threads = workers
        return make_python(task_id, num_envs, batch_size=batch_size, num_workers=num_threads, seed=seed, **kwargs)
    return EnvPool(task_id, num_envs, batch_size=batch_size, num_threads=num_threads, seed=seed, **kwargs)


def load_env(header: str, task_id: str, class_name: Optional[str] = None, verbose: bool = False) -> str:
    """Compiles the C++ env ``class_name`` (default: ``task_id`` less its version) of ``header`` against the
    installed engine, caches the build and registers ``task_id`` for ``rlfast.make``; see ``rlfast/loader.py``."""
    from rlfast.loader import load_env as load

    return load(header, task_id, class_name, verbose)


def make_from(env_fn: Any, num_envs: int, **kwargs: Any) -> EnvPool:
    """A pool of Python envs ``env_fn(**env_kwargs_per_env[i])`` run by worker processes (``rlfast/procpool.py``,
    ``make_from``): the same ``send``/``recv`` as any pool."""
    from rlfast.procpool import make_from as make_python

    return make_python(env_fn, num_envs, **kwargs)


def make_gymnasium(task_id: str, num_envs: int, seed: int = 0, **kwargs: Any) -> GymnasiumVectorEnv:
    """A gymnasium ``VectorEnv`` (numpy in and out) over a sync pool of any task ``make`` takes (an engine task,
    a ``load_env`` task, or a gymnasium id in its module form, run in worker processes)."""
    return GymnasiumVectorEnv(make(task_id, num_envs, seed=seed, **kwargs))
