"""The pixel envs of the Atari PPO trainers (scripts/ppo_atari.py, scripts/ppo_atari_lstm.py): a sync pool whose
frames are stacked on the training device.

Data path of a step: the pool (``stack_num=1``) writes the newest 84x84 frame of each env into a pinned ring;
one non-blocking copy takes it to the device, where ``rlfast.FrameStack`` keeps each env's last ``stack``
frames (restarted where a game starts), handed on in the memory format the CNN computes in (channels-last with
that speed option); the sampled actions go back through ``send`` (one sync). The game
statistics (``Episodes``: whole games, raw scores) are kept on the host, where they arrive.

With ``groups`` > 1 (``--env-groups``) the envs are split into that many equal groups, each a sync pool of its own
with its share of the worker threads: a trainer sends one group's actions and computes the next group's while the
first steps (EnvPool's async mode, with fixed groups in a fixed order, so the trajectories are one pool's). Env i
is seeded ``run.env_seed + i`` either way. ``acting_threads`` gives acting the cores a stepping group leaves.

Atari tasks get the trainer's ``env_kwargs`` (CleanRL's ``episodic_life`` and ``reward_clip``); a user's pixel env
(a gymnasium ``"module:Env-v0"`` id, a ``rlfast.load_env`` header) must give uint8 frames of shape (1, 84, 84) and
gets none: a game is an episode, from a reset to its end.
"""

from contextlib import contextmanager
from typing import Iterator, Optional

import gymnasium as gym
import numpy as np
import torch

import rlfast
from rlfast.algos.episodes import Episodes, game_starts
from rlfast.algos.run import Run
from rlfast.algos.runargs import check_frames

class PixelEnvs:
    """This rank's ``num_envs`` envs of ``env_id`` (env i seeded ``run.env_seed + i``), ``stack`` frames per
    observation, stacked on ``run.device``. ``observation_space`` is the stacked one; ``episodes`` the game
    statistics of the last ``rows`` steps (``Run.end_iteration`` logs them). An Atari task is made with
    ``env_kwargs`` and evaluated (scripts/evaluate.py) with ``eval_env_kwargs``; ``frame_size`` other than 84 has
    the engine resize an Atari game's frames to that square (your own env must give frames of that size)."""

    def __init__(self, run: Run, script: str, env_id: str, num_envs: int, stack: int, env_kwargs: dict,
                 eval_env_kwargs: dict, num_threads: Optional[int] = None, rows: int = 1,
                 frame_size: int = 84, groups: int = 1) -> None:  # fmt: skip
        if groups < 1 or num_envs % groups:
            raise ValueError(f"{num_envs} envs do not split into {groups} equal groups")
        atari = rlfast.task_family(env_id) == "atari"  # else your own pixel env: its frames, its episodes
        size = {"img_height": frame_size, "img_width": frame_size} if atari and frame_size != 84 else {}
        self.env_kwargs = {**env_kwargs, **size} if atari else {}
        # scripts/evaluate.py's envs: whole games on stacks the pool makes; your env's frames it stacks itself
        self.eval_env_kwargs = {**eval_env_kwargs, **size, "stack_num": stack} if atari else {"frame_stack": stack}
        threads = num_threads or min(run.world.cpu_share(), num_envs)
        n = num_envs // groups
        self.group_threads = max(1, min(threads // groups, n))  # each group's pool's worker threads
        self.pools = [run.make_env(n, num_threads=self.group_threads, seed=run.env_seed + g * n, **self.env_kwargs)
                      for g in range(groups)]  # fmt: skip
        self.groups = [slice(g * n, (g + 1) * n) for g in range(groups)]
        """the envs of each group, in the order a trainer acts and steps them (one group: all of them)"""
        frame_shape = check_frames(script, env_id, self.pools[0].single_observation_space, frame_size)
        self.observation_space = gym.spaces.Box(0, 255, (stack * frame_shape[0], *frame_shape[1:]), np.uint8)
        self.action_space = self.pools[0].single_action_space
        self.device = run.device
        # the stacks in the memory format the CNN computes in (the speed option channels_last): one reorder here
        # per step, none in acting or in the update's minibatches (Rollout's obs_memory_format, take_rows)
        self.memory_format = torch.channels_last if run.speed["channels_last"] else torch.contiguous_format
        self.frames = rlfast.FrameStack(num_envs, stack, frame_shape, device=run.device)
        self.ids = torch.arange(num_envs, device=run.device)  # a sync pool returns its envs in id order
        self.episodes = Episodes(num_envs, atari=atari, rows=rows)

    def _pool(self, group: Optional[slice]) -> rlfast.EnvPool:
        if group is None and len(self.pools) > 1:
            raise ValueError(f"name the group: the envs are in {len(self.pools)} groups (PixelEnvs.groups)")
        return self.pools[0 if group is None else self.groups.index(group)]

    def reset(self) -> torch.Tensor:
        """Resets every env; their first stacked observations [N, stack, 84, 84] uint8 on the device (in
        ``memory_format``)."""
        obs = []
        for group, pool in zip(self.groups, self.pools):
            frames, info = pool.reset()
            obs.append(self.frames.update(frames.to(self.device), self.ids[group], game_starts(info).to(self.device)))
        return torch.cat(obs).contiguous(memory_format=self.memory_format)

    def send(self, action: torch.Tensor, group: Optional[slice] = None) -> None:
        """Steps the envs of ``group`` (one of ``groups``; None: all, with one group) with ``action`` [n]."""
        self._pool(group).send(action)

    def recv(self, row: int, group: Optional[slice] = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                                                     torch.Tensor]:  # fmt: skip
        """The results of ``group``'s step (None: all envs, with one group): (next observation stacks, reward [n]
        (on the CPU a view into the pool's ring, valid until its second recv after this one: copy it), done [n]
        bool, terminated [n] bool: the part of done that is no time limit), on the device (queued non-blocking
        copies). Records the game ends in ``row``."""
        pool, group = self._pool(group), group or self.groups[0]
        o, r, term, trunc, info = pool.recv()
        done = torch.logical_or(term.to(self.device, non_blocking=True), trunc.to(self.device, non_blocking=True))
        terminated = term.to(self.device, non_blocking=True)
        new_game = game_starts(info).to(self.device, non_blocking=True)
        obs = self.frames.update(o.to(self.device, non_blocking=True), self.ids[group], new_game)
        self.episodes.record(row, term, trunc, info, envs=group)
        reward = r.to(self.device, non_blocking=True)
        return obs.contiguous(memory_format=self.memory_format), reward, done, terminated

    @contextmanager
    def acting_threads(self) -> Iterator[None]:
        """With more than one group on the CPU, torch runs on the threads a stepping group's pool leaves free
        within it (its threads less the pool's, at least one), so acting does not crowd out the envs it overlaps;
        afterwards (the update) torch has them all back."""
        if len(self.groups) == 1 or self.device.type != "cpu":
            yield
            return
        threads = torch.get_num_threads()
        torch.set_num_threads(max(1, threads - self.group_threads))
        try:
            yield
        finally:
            torch.set_num_threads(threads)
