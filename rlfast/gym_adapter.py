"""gymnasium ``VectorEnv`` over a sync rlfast pool, so existing gymnasium code runs unchanged."""

from __future__ import annotations

from typing import Any, Optional

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from rlfast.pool import EnvPool


def _numpy(x: Any) -> Any:
    """A copy of a pool's tensor as a numpy array; of a dict of them (a Dict observation), a dict of arrays."""
    return {k: v.numpy().copy() for k, v in x.items()} if isinstance(x, dict) else x.numpy().copy()


class GymnasiumVectorEnv(VectorEnv):
    """numpy in, numpy out. Arrays returned are copies (the pool's buffers are reused).

    ``info`` holds ``env_id``, ``elapsed_step``, ``episode_return``, ``episode_length``, the
    env's own info arrays and, with same-step autoreset, ``final_obs`` with its ``_final_obs``
    mask (gymnasium's convention). A Dict observation space (Python envs) gives dicts of arrays, as
    gymnasium's vector envs do.
    """

    def __init__(self, pool: EnvPool) -> None:
        if not pool.is_sync:
            raise ValueError(f"GymnasiumVectorEnv needs a sync pool (batch_size == num_envs), got {pool!r}")
        self.pool = pool
        self.num_envs = pool.num_envs
        self.single_observation_space = pool.single_observation_space
        self.single_action_space = pool.single_action_space
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        mode = AutoresetMode.SAME_STEP if pool.autoreset_mode == "same_step" else AutoresetMode.NEXT_STEP
        self.metadata = {"autoreset_mode": mode}

    def reset(
        self, *, seed: Optional[int] = None, options: Optional[dict[str, Any]] = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """gymnasium's reset. ``options={"reset_mask": mask}`` (bool array, one per env) resets
        only the masked envs (env i re-seeded with ``seed + i`` when ``seed`` is given); the others
        are left as they are and report their current observation and info again."""
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        if options:
            raise ValueError(f"rlfast envs take no reset options besides reset_mask, got {sorted(options)}")
        if mask is None:
            obs, info = self.pool.reset(seed=seed)
            return _numpy(obs), self._info(info, None)
        mask = np.asarray(mask)
        if mask.dtype != np.bool_ or mask.shape != (self.num_envs,):
            raise ValueError(f"reset_mask must be a bool array of shape ({self.num_envs},), got {mask!r}")
        if not mask.any():
            raise ValueError("reset_mask selects no env")
        chosen, others = np.flatnonzero(mask), np.flatnonzero(~mask)
        if seed is not None:
            self.pool.seed(seed, env_ids=chosen)
        self.pool.async_reset(chosen)
        if others.size:
            self.pool._peek(others)
        obs, _, _, _, info = self.pool.recv()
        return _numpy(obs), self._info(info, None)

    def step(self, actions: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.pool.step(np.asarray(actions))
        done = (terminated | truncated).numpy().copy()
        return (
            _numpy(obs),
            reward.numpy().astype(np.float64),
            terminated.numpy().copy(),
            truncated.numpy().copy(),
            self._info(info, done),
        )

    def _info(self, info: dict, done: Optional[np.ndarray]) -> dict[str, Any]:
        out = {k: _numpy(v) for k, v in info.items()}
        if "final_obs" in out:
            mask = done if done is not None else np.zeros(self.num_envs, dtype=bool)
            out["_final_obs"] = mask
        return out

    def close_extras(self, **kwargs: Any) -> None:
        self.pool.close()
