"""The errors a pool raises: ``EnvError`` (an env or a worker process failed) and ``PoolStateError``.

``PoolStateError`` is the engine's own exception type (``_C.PoolStateError``), raised from C++ when a call
does not fit the pool's state (closed, too few envs in flight to ever fill a batch, an env still in flight);
``except rlfast.PoolStateError`` catches it from every pool, those of ``rlfast.load_env`` modules included.
"""

import torch

from rlfast._ext import _C

PoolStateError = _C.PoolStateError


class EnvError(RuntimeError):
    """An environment failed; raised by ``recv``. ``env_ids``: the envs that are idle again (send to them to go on).

    An env that raised (in its step or reset): the batch it belonged to is consumed, ``env_ids`` lists that
    batch's envs, and the env(s) that raised restart with a reset at their next send.

    A worker process of Python envs that died or hung (``rlfast/procpool.py``): raised once, naming the worker,
    its pid, its envs and how it ended; that ``recv`` returns no batch and loses no other env's result, the
    worker's envs run on in a new process (each reset at its next send), and ``env_ids`` lists those of its envs
    that were in flight.
    """

    def __init__(self, message: str, env_ids: torch.Tensor) -> None:
        super().__init__(message)
        self.env_ids = env_ids
