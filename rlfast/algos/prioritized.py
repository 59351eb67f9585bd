"""Proportional prioritized replay (Schaul et al. 2016, "Prioritized Experience Replay") on the frames-once buffer.

``PrioritizedReplayBuffer`` is a ``ReplayBuffer`` whose ``sample`` draws the transition of slot i with probability
``P(i) = p_i / sum_j p_j`` over the valid slots, where ``p_i = (|delta_i| + eps) ** alpha`` comes from the TD error
``delta_i`` of its last use in a gradient step (``update_priorities``) and a new transition gets the largest
priority so far, so that every transition is replayed at least once. A batch also carries ``weights``, the
importance-sampling correction ``(n P(i)) ** -beta`` (n: the valid slots) divided by the batch's largest, which
only scales updates down; ``beta`` is annealed to 1 by the trainer. Rainbow (Hessel et al. 2018) uses alpha 0.5
and beta from 0.4 to 1.

Sampling without a sum tree: the slots (flat, ``env * per_env + slot``, the buffer's own order) are cut into
blocks of about sqrt(capacity); a block is drawn by its priority sum, stratified over the batch (the i-th draw
from the i-th of B equal parts of the total, as Schaul et al. do), then a slot in it through the cumulative sum of
its priorities: O(capacity / block + B x block) tensor work per batch and no Python loop or host sync. The valid
mask (``ReplayBuffer.valid``) is folded into the priorities once after each ``add`` (O(capacity)), not per batch.
"""

import math
from typing import Optional

import torch

from rlfast.algos.replay import ReplayBuffer


class PrioritizedReplayBuffer(ReplayBuffer):
    """A ``ReplayBuffer`` (same arguments, plus ``alpha``, ``beta`` and ``eps``) sampling by priority; ``sample``
    adds ``weights`` [B] float32 and ``indices`` [B] int64 (the flat slots, for ``update_priorities``) to the
    batch. Set ``beta`` before sampling to anneal it. Its ``state_dict`` holds the priorities; it loads a plain
    ``ReplayBuffer``'s (every transition then at priority 1)."""

    def __init__(self, *args, alpha: float = 0.5, beta: float = 0.4, eps: float = 1e-6, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if not alpha >= 0:
            raise ValueError(f"alpha must be >= 0, got {alpha}")
        if not 0 <= beta <= 1:
            raise ValueError(f"beta must be in [0, 1], got {beta}")
        if not eps > 0:
            raise ValueError(f"eps must be > 0, got {eps}")
        self.alpha, self.beta, self.eps = alpha, beta, eps
        self.block = max(math.isqrt(self.capacity), 1)
        self.num_blocks = -(-self.capacity // self.block)
        padded = self.num_blocks * self.block
        self.priority = torch.zeros(padded, dtype=torch.float32, device=self.device)
        """p_i = (|delta_i| + eps) ** alpha of every flat slot (the padding past ``capacity`` stays 0)"""
        self.max_priority = torch.ones((), dtype=torch.float32, device=self.device)
        """the largest p_i so far: a new transition's"""
        self._weights: Optional[torch.Tensor] = None  # [num_blocks, block]: priority where valid, else 0
        self._block_sums: Optional[torch.Tensor] = None  # [num_blocks] float64
        self._num_valid: Optional[torch.Tensor] = None  # n, the valid slots

    @property
    def nbytes(self) -> int:
        return super().nbytes + 2 * self.priority.numel() * self.priority.element_size()

    def add(self, obs, actions, rewards, terminated, truncated, first=None, env_ids=None) -> None:
        """``ReplayBuffer.add``; the new transitions get the largest priority so far."""
        super().add(obs, actions, rewards, terminated, truncated, first, env_ids)
        ids = self._all_envs if env_ids is None else env_ids.to(self.device, torch.long, non_blocking=True)
        self.priority[ids * self.per_env + (self.count[ids] - 1) % self.per_env] = self.max_priority
        self._weights = None

    def _fold(self) -> None:
        """The valid mask into the priorities, and the blocks' sums (after an ``add``)."""
        valid = self.valid().reshape(-1)
        weights = self.priority.clone()
        weights[: self.capacity] *= valid
        self._weights = weights.view(self.num_blocks, self.block)
        self._block_sums = self._weights.sum(1, dtype=torch.float64)
        self._num_valid = valid.sum()

    def sample_indices(self, batch_size: int, generator: Optional[torch.Generator] = None) -> torch.Tensor:
        """[batch_size] flat slot indices, slot i with probability P(i) (see the module docstring)."""
        if not 1 <= batch_size <= len(self):
            raise ValueError(f"cannot sample {batch_size} transitions: the buffer holds at most {len(self)}")
        if self._weights is None:
            self._fold()
        ends = self._block_sums.cumsum(0)
        total = ends[-1]
        if self.device.type == "cpu" and float(total) == 0:  # (elsewhere: no host sync for this check)
            raise ValueError(f"cannot sample {batch_size} transitions: none is held whole yet")
        B, f64 = batch_size, torch.float64
        # Each draw strictly below its total (rounding could reach it), so that the first cumulative sum above it
        # is that of a block, then a slot, of positive priority.
        u = (torch.arange(B, dtype=f64, device=self.device)
             + torch.rand(B, dtype=f64, device=self.device, generator=generator)) * (total / B)  # fmt: skip
        u = torch.minimum(u, torch.nextafter(total, total.new_zeros(())))
        blk = torch.searchsorted(ends, u.unsqueeze(1), right=True).squeeze(1)
        inside = self._weights[blk].cumsum(1, dtype=f64)  # [B, block]
        v = torch.rand(B, dtype=f64, device=self.device, generator=generator) * inside[:, -1]
        v = torch.minimum(v, torch.nextafter(inside[:, -1], inside.new_zeros(())))
        slot = torch.searchsorted(inside, v.unsqueeze(1), right=True).squeeze(1)
        return blk * self.block + slot

    def sample(self, batch_size: int, generator: Optional[torch.Generator] = None) -> dict[str, torch.Tensor]:
        """``batch_size`` transitions drawn by priority (with replacement), with ``weights`` and ``indices``."""
        flat = self.sample_indices(batch_size, generator)
        batch = self.get(flat)
        prob = self._weights.view(-1)[flat].double() / self._block_sums.sum()
        weights = (self._num_valid * prob).pow(-self.beta)
        batch["weights"] = (weights / weights.max()).float()
        batch["indices"] = flat
        return batch

    def probabilities(self) -> torch.Tensor:
        """[num_envs, per_env] float64: P(i) of every slot now (0 where not valid)."""
        if self._weights is None:
            self._fold()
        p = self._weights.reshape(-1)[: self.capacity].double() / self._block_sums.sum()
        return p.view(self.num_envs, self.per_env)

    def update_priorities(self, indices: torch.Tensor, td_errors: torch.Tensor) -> None:
        """The priorities of the slots ``indices`` [B] (a batch's, before the next ``add``) from their TD errors
        [B]: ``(|delta| + eps) ** alpha`` (a slot drawn twice keeps one of its values)."""
        p = (td_errors.detach().abs().to(torch.float32) + self.eps).pow(self.alpha)
        self.priority[indices] = p
        torch.maximum(self.max_priority, p.max(), out=self.max_priority)
        if self._weights is not None:  # sampled since the last add: these slots are valid (their weights > 0)
            flat = self._weights.view(-1)
            flat[indices] = torch.where(flat[indices] > 0, self.priority[indices], 0.0)
            blk = torch.div(indices, self.block, rounding_mode="floor")
            self._block_sums[blk] = self._weights[blk].sum(1, dtype=torch.float64)

    def state_dict(self) -> dict:
        return {**super().state_dict(), "priority": self.priority, "max_priority": self.max_priority}

    def load_state_dict(self, state: dict) -> None:
        super().load_state_dict(state)
        if "priority" in state:
            self.priority.copy_(state["priority"])
            self.max_priority.copy_(state["max_priority"])
        else:  # a uniform buffer's: every transition alike
            self.priority[: self.capacity] = 1.0
            self.max_priority.fill_(1.0)
        self._weights = None
