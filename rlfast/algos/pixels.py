"""The pixel envs of the Atari PPO trainers (scripts/ppo_atari.py, scripts/ppo_atari_lstm.py): a sync pool whose
frames are stacked on the training device.

Data path of a step: the pool (``stack_num=1``) writes the newest 84x84 frame of each env into a pinned ring;
one non-blocking copy takes it to the device, where ``rlfast.FrameStack`` keeps each env's last ``stack``
frames (restarted where a game starts), handed on in the memory format the CNN computes in (channels-last with
that speed option); the sampled actions go back through ``send`` (one sync). The game
statistics (``Episodes``: whole games, raw scores) are kept on the host, where they arrive.

With ``groups`` > 1 (``--env-groups``) the envs are split into that many equal groups, each a sync pool of its own
(``rlfast.algos.envgroups.EnvGroups``): a trainer sends one group's actions and computes the next group's while the
first steps, on the same trajectories as one pool's.

Atari tasks get the trainer's ``env_kwargs`` (CleanRL's ``episodic_life`` and ``reward_clip``); a user's pixel env
(a gymnasium ``"module:Env-v0"`` id, a ``rlfast.load_env`` header) must give uint8 frames of shape (1, 84, 84) and
gets none: a game is an episode, from a reset to its end.
"""

from typing import Optional

import gymnasium as gym
import numpy as np
import torch

import rlfast
from rlfast.algos.envgroups import EnvGroups
from rlfast.algos.episodes import Episodes, game_starts
from rlfast.algos.run import Run
from rlfast.algos.runargs import check_frames

class PixelEnvs(EnvGroups):
    """This rank's ``num_envs`` envs of ``env_id`` (env i seeded ``run.env_seed + i``), ``stack`` frames per
    observation, stacked on ``run.device``. ``observation_space`` is the stacked one; ``episodes`` the game
    statistics of the last ``rows`` steps (``Run.end_iteration`` logs them). An Atari task is made with
    ``env_kwargs`` and evaluated (scripts/evaluate.py) with ``eval_env_kwargs``; ``frame_size`` other than 84 has
    the engine resize an Atari game's frames to that square (your own env must give frames of that size)."""

    def __init__(self, run: Run, script: str, env_id: str, num_envs: int, stack: int, env_kwargs: dict,
                 eval_env_kwargs: dict, num_threads: Optional[int] = None, rows: int = 1,
                 frame_size: int = 84, groups: int = 1) -> None:  # fmt: skip
        atari = rlfast.task_family(env_id) == "atari"  # else your own pixel env: its frames, its episodes
        size = {"img_height": frame_size, "img_width": frame_size} if atari and frame_size != 84 else {}
        self.env_kwargs = {**env_kwargs, **size} if atari else {}
        # scripts/evaluate.py's envs: whole games on stacks the pool makes; your env's frames it stacks itself
        self.eval_env_kwargs = {**eval_env_kwargs, **size, "stack_num": stack} if atari else {"frame_stack": stack}
        super().__init__(run, num_envs, groups, num_threads, **self.env_kwargs)
        frame_shape = check_frames(script, env_id, self.pools[0].single_observation_space, frame_size)
        self.observation_space = gym.spaces.Box(0, 255, (stack * frame_shape[0], *frame_shape[1:]), np.uint8)
        self.action_space = self.pools[0].single_action_space
        # the stacks in the memory format the CNN computes in (the speed option channels_last): one reorder here
        # per step, none in acting or in the update's minibatches (Rollout's obs_memory_format, take_rows)
        self.memory_format = torch.channels_last if run.speed["channels_last"] else torch.contiguous_format
        self.frames = rlfast.FrameStack(num_envs, stack, frame_shape, device=run.device)
        self.ids = torch.arange(num_envs, device=run.device)  # a sync pool returns its envs in id order
        self.episodes = Episodes(num_envs, atari=atari, rows=rows)

    def reset(self) -> torch.Tensor:
        """Resets every env; their first stacked observations [N, stack, 84, 84] uint8 on the device (in
        ``memory_format``)."""
        obs = []
        for group, pool in zip(self.groups, self.pools):
            frames, info = pool.reset()
            obs.append(self.frames.update(frames.to(self.device), self.ids[group], game_starts(info).to(self.device)))
        return torch.cat(obs).contiguous(memory_format=self.memory_format)

    def recv(self, row: int, group: Optional[slice] = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                                                     torch.Tensor]:  # fmt: skip
        """The results of ``group``'s step (None: all envs, with one group): (next observation stacks, reward [n]
        (on the CPU a view into the pool's ring, valid until its second recv after this one: copy it), done [n]
        bool, terminated [n] bool: the part of done that is no time limit), on the device (queued non-blocking
        copies). Records the game ends in ``row``."""
        pool, group = self.pool(group), group or self.groups[0]
        o, r, term, trunc, info = pool.recv()
        done = torch.logical_or(term.to(self.device, non_blocking=True), trunc.to(self.device, non_blocking=True))
        terminated = term.to(self.device, non_blocking=True)
        new_game = game_starts(info).to(self.device, non_blocking=True)
        obs = self.frames.update(o.to(self.device, non_blocking=True), self.ids[group], new_game)
        self.episodes.record(row, term, trunc, info, envs=group)
        reward = r.to(self.device, non_blocking=True)
        return obs.contiguous(memory_format=self.memory_format), reward, done, terminated
