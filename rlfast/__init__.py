"""rlfast: PyTorch-native RL training with a C++ asynchronous environment engine."""

from typing import Any, Optional

from rlfast.envpool import EnvError, EnvPool, PoolStateError, is_python_task, list_envs, task_family
from rlfast.frame_stack import FrameStack
from rlfast.gym_adapter import GymnasiumVectorEnv

__version__ = "0.1.0"

__all__ = [
    "EnvError", "EnvPool", "FrameStack", "GymnasiumVectorEnv", "PoolStateError", "list_envs", "make", "load_env",
    "make_from", "make_gymnasium", "task_family",
]


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
    ``num_threads`` worker processes (default: one per core); see ``rlfast/procpool.py``.
    """
    from rlfast import loader

    if (header := loader.header_task(task_id)) is not None:  # "path/my_env.h:MyEnv-v0"
        loader.load_env(*header)
        task_id = header[1]
    if loader.loaded(task_id) is not None:
        return loader.make_loaded(task_id, num_envs, batch_size=batch_size, num_threads=num_threads, seed=seed,
                                  **kwargs)  # fmt: skip
    if is_python_task(task_id):
        from rlfast.procpool import make_gymnasium as make_python

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
    """A gymnasium ``VectorEnv`` (numpy in and out) over a sync pool."""
    return GymnasiumVectorEnv(EnvPool(task_id, num_envs, seed=seed, **kwargs))
