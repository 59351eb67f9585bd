"""Continuous-control pieces: a diagonal Gaussian policy as plain tensor ops, and CleanRL's
MuJoCo wrapper stack (observation normalization + clip, reward scaling + clip) on the device.

CleanRL's ``ppo_continuous_action.py`` wraps each env in ``ClipAction``, ``NormalizeObservation``,
``TransformObservation(clip ±10)``, ``NormalizeReward(gamma)`` and ``TransformReward(clip ±10)``.
``ObsRewardNormalizer`` does the same on a batch of envs with ``rlfast.algos.normalize``'s
statistics, which follow gymnasium's vector wrappers under next-step autoreset:

- every observation the pool returns updates the statistics once, the first one of an episode
  (reset step) included, as gymnasium's wrappers do on ``reset``;
- the reset step that follows an episode end (reward 0, action ignored) leaves the discounted
  return and its statistics alone, as a single-env ``NormalizeReward`` never sees that step;
- the statistics are shared by all envs (gymnasium's vector wrappers, EnvPool, Brax); CleanRL's
  per-env wrappers keep one set per env, which is the same thing at its default ``num_envs=1``.
"""

import math
from typing import Any, Optional

import torch

from rlfast.algos.distributed import World
from rlfast.algos.envgroups import EnvGroups
from rlfast.algos.episodes import Episodes
from rlfast.algos.normalize import ObsNormalizer, RewardScaler
from rlfast.algos.run import Run

_LOG_SQRT_2PI = math.log(math.sqrt(2 * math.pi))


def diag_normal(
    mean: torch.Tensor,
    logstd: torch.Tensor,
    action: Optional[torch.Tensor] = None,
    noise: Optional[torch.Tensor] = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Samples (or scores) a diagonal Gaussian, like ``torch.distributions.Normal(mean, logstd.exp())``
    with log-prob and entropy summed over the action dimensions.

    Args:
        mean: [N, A] action means.
        logstd: [N, A] log standard deviations (broadcast a state-independent [1, A] with ``expand_as``).
        action: [N, A] actions to score; sampled (without gradient) when None.
        noise: [N, A] standard normal numbers to sample with (``mean + std * noise``); drawn here when
            None. The trainers pass ``Run.action_noise`` (see ``rlfast.algos.distributions.categorical``).

    Returns:
        ``(action [N, A], logprob [N], entropy [N])``. Sampling draws ``torch.normal(mean, std)``,
        the same numbers as ``Normal.sample()`` under the same RNG state.
    """
    std = logstd.exp()
    if action is None:
        with torch.no_grad():
            action = torch.normal(mean, std) if noise is None else mean + std * noise
    logprob = (-((action - mean) ** 2) / (2 * std**2) - logstd - _LOG_SQRT_2PI).sum(-1)
    entropy = (0.5 + _LOG_SQRT_2PI + logstd).sum(-1)
    return action, logprob, entropy


class ObsRewardNormalizer:
    """CleanRL's observation and reward wrappers for a batch of ``num_envs`` envs, on ``device``.

    Observation statistics are float64, as gymnasium's become for MuJoCo's float64 observations;
    the outputs are float32. ``normalizers()`` is what goes into a checkpoint: ``"obs"`` is an
    ``ObsNormalizer`` (scripts/evaluate.py applies it frozen), ``"reward"`` a ``RewardScaler``.
    """

    def __init__(
        self,
        obs_shape: tuple[int, ...],
        num_envs: int,
        gamma: float,
        obs_clip: float = 10.0,
        reward_clip: float = 10.0,
        device: Optional[torch.device | str] = None,
        world: World = World(),
    ) -> None:
        """``num_envs``: this rank's envs; under torchrun (``world``) the statistics are those of every rank's
        envs (sums over the ranks, ``World.sum``)."""
        self.obs = ObsNormalizer(obs_shape, dtype=torch.float64, device=device)
        self.reward = RewardScaler(num_envs, gamma=gamma, device=device)
        self.obs.rms.reduce = self.reward.rms.reduce = world.sum if world.distributed else None
        self.num_envs = num_envs
        self.obs_clip = obs_clip
        self.reward_clip = reward_clip

    def observations(self, obs: torch.Tensor) -> torch.Tensor:
        """obs: [N, *obs_shape] raw (any float dtype) -> normalized, clipped, float32 [N, *obs_shape]."""
        return self.obs(obs.to(torch.float64)).clamp_(-self.obs_clip, self.obs_clip).to(torch.float32)

    def rewards(self, reward: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor,
                envs: slice = slice(None)) -> torch.Tensor:  # fmt: skip
        """reward, terminated, truncated: [n] of one step of the envs ``envs`` (all by default) -> scaled, clipped
        float32 rewards [n]."""
        scaled = self.reward(reward.to(torch.float32), terminated, truncated, envs)
        return scaled.clamp_(-self.reward_clip, self.reward_clip)

    def new_episodes(self) -> None:
        """Forgets the per-env discounted returns: every env starts a fresh episode (e.g. after a resume)."""
        device = self.reward.returns.device
        self.reward.returns = torch.zeros(self.num_envs, dtype=torch.float32, device=device)
        self.reward.prev_dones = torch.zeros(self.num_envs, dtype=torch.bool, device=device)

    def normalizers(self) -> dict[str, Any]:
        """``{"obs": ObsNormalizer, "reward": RewardScaler}`` for ``make_checkpoint`` / ``restore``."""
        return {"obs": self.obs, "reward": self.reward}


class VectorEnvs(EnvGroups):
    """This rank's ``num_envs`` envs of a vector-observation task (``rlfast.algos.envgroups.EnvGroups``: env i seeded
    ``run.env_seed + i``, in ``groups`` that take turns) behind CleanRL's wrappers: ``norm`` (an
    ``ObsRewardNormalizer``, its statistics shared by all groups) normalizes their observations and scales their
    rewards on ``run.device``; ``episodes`` keeps the raw returns of the last ``rows`` steps.

    With more than one group the statistics take each group's observations and returns as they come, so a group's
    observations are normalized with the statistics of this step's earlier groups counted and its later ones not
    (rl_games' ``normalize_input`` under EnvPool's async mode does the same); with one group, gymnasium's vector
    wrappers: each step's whole batch counted, then normalized."""

    def __init__(self, run: Run, num_envs: int, groups: int = 1, num_threads: Optional[int] = None, rows: int = 1,
                 gamma: float = 0.99, obs_clip: float = 10.0, reward_clip: float = 10.0,
                 **env_kwargs: Any) -> None:  # fmt: skip
        super().__init__(run, num_envs, groups, num_threads, **env_kwargs)
        self.single_observation_space = self.pools[0].single_observation_space
        self.single_action_space = self.pools[0].single_action_space
        self.norm = ObsRewardNormalizer(self.single_observation_space.shape, num_envs, gamma, obs_clip, reward_clip,
                                        run.device, world=run.world)  # fmt: skip
        self.episodes = Episodes(num_envs, atari=False, rows=rows)

    def reset(self) -> torch.Tensor:
        """Resets every env; their first observations [N, *obs_shape] normalized (one update of the statistics)."""
        obs = [pool.reset()[0].to(self.device) for pool in self.pools]
        return self.norm.observations(torch.cat(obs))

    def recv(self, row: int, group: Optional[slice] = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                                                     torch.Tensor]:  # fmt: skip
        """The results of ``group``'s step (None: all envs, with one group): (next observations normalized [n,
        *obs_shape], rewards scaled [n], done [n] bool, terminated [n] bool: the part of done that is no time
        limit, on the CPU a view into the pool's ring, valid until its second recv after this one: copy it), on the
        device. Records the episode ends in ``row``."""
        pool, group = self.pool(group), group or self.groups[0]
        # o, r, terminated, truncated, info are views into the pool's ring, valid until its second step after this
        # one; the normalizers read them here (float64 / float32 results, no view kept)
        o, r, terminated, truncated, info = pool.recv()
        term, trunc = terminated.to(self.device, non_blocking=True), truncated.to(self.device, non_blocking=True)
        obs = self.norm.observations(o.to(self.device, non_blocking=True))
        reward = self.norm.rewards(r.to(self.device, non_blocking=True), term, trunc, group)
        self.episodes.record(row, terminated, truncated, info, envs=group)
        return obs, reward, torch.logical_or(term, trunc), term
