"""Frame stacking on the training device.

Make the pool with ``stack_num=1`` so each step ships only the newest frame (a quarter of
the host-to-device traffic of a 4-frame stack), then rebuild the stacks where the policy runs::

    pool = rlfast.make("Pong-v5", num_envs=64, batch_size=16, stack_num=1)
    stack = FrameStack(pool.num_envs, 4, pool.single_observation_space.shape, device="cuda")
    obs, reward, terminated, truncated, info = pool.recv()
    obs4 = stack.update(obs.to("cuda", non_blocking=True), info["env_id"].to("cuda"),
                        info["new_game"].to("cuda"))     # [16, 4, 84, 84]

It reproduces the engine's own stacking (``stack_num=4``) exactly, resets included, in sync
and async mode, because both follow one rule: every result pushes its frame as the newest,
and a result with ``new_game`` (the first observation of a new game) fills the whole stack
with it. That holds for the default next-step autoreset; with ``autoreset_mode="same_step"``
pass ``terminated | truncated`` instead of ``new_game`` (and keep ``episodic_life=False``).
"""

from __future__ import annotations

from typing import Sequence, Union

import torch


class FrameStack:
    """Per-env stacks of the last ``stack_num`` frames, kept as one tensor on ``device``.

    ``stacks``: [num_envs, stack_num, *frame_shape], oldest frame first. ``update`` touches
    only the rows of the envs in the batch (gather, shift, scatter), so it works for async
    batches in any env order.
    """

    def __init__(
        self,
        num_envs: int,
        stack_num: int,
        frame_shape: Sequence[int],
        device: Union[str, torch.device] = "cpu",
        dtype: torch.dtype = torch.uint8,
    ) -> None:
        if num_envs < 1 or stack_num < 1:
            raise ValueError(f"num_envs and stack_num must be >= 1, got {num_envs} and {stack_num}")
        if torch.device(device).type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"FrameStack got device {str(device)!r} but torch.cuda.is_available() is False")
        self.stack_num = stack_num
        self.frame_shape = tuple(frame_shape)
        self.stacks = torch.zeros((num_envs, stack_num, *self.frame_shape), dtype=dtype, device=device)

    def update(self, frames: torch.Tensor, env_ids: torch.Tensor, new_game: torch.Tensor) -> torch.Tensor:
        """Pushes the newest frames and returns the batch's stacks.

        frames: [B, *frame_shape] (the pool's obs with stack_num=1); env_ids: [B] integer;
        new_game: [B] bool. Returns [B, stack_num * C, H, W] (channels of each frame
        consecutive, like the engine's obs), a fresh tensor.
        """
        if tuple(frames.shape[1:]) != self.frame_shape:
            raise ValueError(f"frames must be [B, {', '.join(map(str, self.frame_shape))}], got {list(frames.shape)}")
        ids = env_ids.to(device=self.stacks.device, dtype=torch.long)
        frames = frames.to(self.stacks.device)
        newest = frames.unsqueeze(1)
        shifted = torch.cat((self.stacks[ids, 1:], newest), dim=1)
        filled = newest.expand_as(shifted)
        mask = new_game.to(self.stacks.device, torch.bool).view(-1, *([1] * (shifted.dim() - 1)))
        stacked = torch.where(mask, filled, shifted)
        self.stacks[ids] = stacked
        return stacked.flatten(1, 2)
