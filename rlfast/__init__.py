"""rlfast: PyTorch-native RL training with a C++ asynchronous environment engine.

The public API; the modules behind it, one job each:

_ext          loads the engine ``rlfast._C`` (MuJoCo's library first, ``_mujoco``); the only importer of ``_C``
registry      the task registry: engine tasks, ``load_env`` tasks, gymnasium ids; ``list_envs``, ``task_family``
pool          ``EnvPool``, the torch-facing pool (``EnvPool.from_binding``), ``pool_config``
errors        ``EnvError``, ``PoolStateError``
factory       ``make`` (dispatch by task family), ``load_env``, ``make_from``, ``make_gymnasium``
loader        C++ envs compiled at run time (``load_env``), registered in ``registry``
procpool      Python (gymnasium) envs in worker processes (``make_from``, gymnasium ids)
gym_adapter   ``GymnasiumVectorEnv``: a gymnasium VectorEnv over a sync pool
frame_stack   ``FrameStack``: the last k observations of each env, on any device
algos         what the trainers in ``scripts/`` share (see ``rlfast/algos/__init__.py``)
_omp          how long torch's idle OpenMP threads spin (set before torch loads, so imported first)
"""

from rlfast import _omp  # noqa: F401  (first: before anything imports torch)
from rlfast.errors import EnvError, PoolStateError
from rlfast.factory import load_env, make, make_from, make_gymnasium
from rlfast.frame_stack import FrameStack
from rlfast.gym_adapter import GymnasiumVectorEnv
from rlfast.pool import EnvPool
from rlfast.registry import list_envs, task_family

__version__ = "0.1.0"

__all__ = [
    "EnvError", "EnvPool", "FrameStack", "GymnasiumVectorEnv", "PoolStateError", "list_envs", "make", "load_env",
    "make_from", "make_gymnasium", "task_family",
]
