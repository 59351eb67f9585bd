"""Running statistics and the observation / reward normalizers built on them, in torch.

Same update rule and semantics as gymnasium's ``RunningMeanStd``, vector
``NormalizeObservation`` and vector ``NormalizeReward`` (next-step autoreset), but the
statistics live on any device and are updated without host synchronization (masked updates
instead of boolean indexing), so they can sit in a rollout's hot path.
"""

from typing import Any, Callable, Optional

import torch


class RunningMeanStd:
    """Mean, variance and count of a stream of ``shape``-d samples (Chan et al.'s parallel rule).

    Starts at mean 0, var 1, count ``epsilon`` like gymnasium's. ``count`` is a 0-d float64
    tensor so that updating never reads a value back to the host.
    """

    def __init__(
        self,
        shape: tuple[int, ...] = (),
        epsilon: float = 1e-4,
        dtype: torch.dtype = torch.float64,
        device: Optional[torch.device | str] = None,
    ) -> None:
        self.mean = torch.zeros(shape, dtype=dtype, device=device)
        self.var = torch.ones(shape, dtype=dtype, device=device)
        self.count = torch.tensor(epsilon, dtype=torch.float64, device=device)
        self.reduce: Optional[Callable[[torch.Tensor], torch.Tensor]] = None
        """Data parallel: sums a float64 tensor over the ranks (``World.sum``); each update
        then adds the batch of every rank, so all ranks keep the statistics one process would."""

    def update(self, x: torch.Tensor, mask: Optional[torch.Tensor] = None) -> None:
        """Adds a batch ``x`` [N, *shape]; with ``mask`` [N] (bool) only the rows where it is True.

        An all-False mask leaves the statistics unchanged (no host sync to check it).
        """
        x = x.to(self.mean.dtype)
        if self.reduce is not None:
            self._add_possibly_empty(*self._reduced_moments(x, mask))
        elif mask is None:
            batch_count = torch.tensor(float(x.shape[0]), dtype=torch.float64, device=x.device)
            self.update_from_moments(x.mean(0), x.var(0, unbiased=False), batch_count)
        else:
            w = mask.to(self.mean.dtype).reshape(-1, *([1] * (x.dim() - 1)))
            batch_count = mask.sum().to(torch.float64)
            n = batch_count.clamp(min=1).to(self.mean.dtype)
            batch_mean = (w * x).sum(0) / n
            batch_var = (w * (x - batch_mean) ** 2).sum(0) / n
            self._add_possibly_empty(batch_mean, batch_var, batch_count)

    def _reduced_moments(
        self, x: torch.Tensor, mask: Optional[torch.Tensor]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(mean, var, count) of the batch of every rank: their counts, sums and sums of squares, summed."""
        w = torch.ones(x.shape[0], dtype=torch.float64, device=x.device) if mask is None else mask.double()
        xd = x.double().reshape(x.shape[0], -1)
        packed = self.reduce(torch.cat([w.sum().reshape(1), w @ xd, w @ (xd * xd)]))
        k = xd.shape[1]
        batch_count = packed[0]
        batch_mean = packed[1 : 1 + k] / batch_count.clamp(min=1)
        batch_var = (packed[1 + k :] / batch_count.clamp(min=1) - batch_mean * batch_mean).clamp(min=0)
        shape, dtype = self.mean.shape, self.mean.dtype
        return batch_mean.reshape(shape).to(dtype), batch_var.reshape(shape).to(dtype), batch_count

    def _add_possibly_empty(self, batch_mean: torch.Tensor, batch_var: torch.Tensor, batch_count: torch.Tensor) -> None:
        """``update_from_moments``, except that an empty batch keeps the statistics exactly ((var * count) /
        count can round away from var); decided on the device, no host sync."""
        mean, var, count = self.mean, self.var, self.count
        self.update_from_moments(batch_mean, batch_var, batch_count)
        empty = batch_count == 0
        self.mean = torch.where(empty, mean, self.mean)
        self.var = torch.where(empty, var, self.var)
        self.count = torch.where(empty, count, self.count)

    def update_from_moments(self, batch_mean: torch.Tensor, batch_var: torch.Tensor, batch_count: torch.Tensor) -> None:
        """gymnasium's ``update_mean_var_count_from_moments``; ``batch_count`` is a 0-d tensor."""
        delta = batch_mean - self.mean
        tot_count = self.count + batch_count
        self.mean = self.mean + delta * (batch_count / tot_count).to(self.mean.dtype)
        m_a = self.var * self.count.to(self.var.dtype)
        m_b = batch_var * batch_count.to(self.var.dtype)
        m2 = m_a + m_b + delta**2 * (self.count * batch_count / tot_count).to(self.var.dtype)
        self.var = m2 / tot_count.to(self.var.dtype)
        self.count = tot_count

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"mean": self.mean.clone(), "var": self.var.clone(), "count": self.count.clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        device = self.mean.device
        self.mean = torch.as_tensor(state["mean"], dtype=self.mean.dtype, device=device).clone()
        self.var = torch.as_tensor(state["var"], dtype=self.var.dtype, device=device).clone()
        self.count = torch.as_tensor(state["count"], dtype=torch.float64, device=device).clone()


class ObsNormalizer:
    """gymnasium's vector ``NormalizeObservation``: update with the batch, then
    ``(obs - mean) / sqrt(var + epsilon)``.

    Statistics default to float32 like gymnasium's vector wrapper (its ``obs_rms`` takes the
    observation space's dtype). Set ``update = False`` to freeze them (evaluation).
    """

    def __init__(
        self,
        shape: tuple[int, ...],
        epsilon: float = 1e-8,
        dtype: torch.dtype = torch.float32,
        device: Optional[torch.device | str] = None,
    ) -> None:
        self.rms = RunningMeanStd(shape, dtype=dtype, device=device)
        self.epsilon = epsilon
        self.update = True

    def __call__(self, obs: torch.Tensor) -> torch.Tensor:
        """obs: [N, *shape] -> normalized [N, *shape] (obs's dtype)."""
        if self.update:
            self.rms.update(obs)
        return ((obs - self.rms.mean) / torch.sqrt(self.rms.var + self.epsilon)).to(obs.dtype)

    def state_dict(self) -> dict[str, Any]:
        return {"rms": self.rms.state_dict(), "epsilon": self.epsilon}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rms.load_state_dict(state["rms"])
        self.epsilon = float(state["epsilon"])


class RewardScaler:
    """gymnasium's vector ``NormalizeReward`` for a next-step-autoreset pool.

    Keeps a per-env discounted return ``G = G * gamma * (1 - terminated) + r``, tracks its
    variance, and returns ``r / sqrt(var(G) + epsilon)`` (not centered). The reset step that
    follows an episode end (reward 0, action ignored) leaves ``G`` and the statistics alone,
    as gymnasium does; a truncated episode's ``G`` carries into the next one, also as
    gymnasium does (it only zeroes ``G`` through ``terminated``).
    """

    def __init__(
        self,
        num_envs: int,
        gamma: float = 0.99,
        epsilon: float = 1e-8,
        device: Optional[torch.device | str] = None,
    ) -> None:
        self.rms = RunningMeanStd((), dtype=torch.float64, device=device)
        self.returns = torch.zeros(num_envs, dtype=torch.float32, device=device)
        self.prev_dones = torch.zeros(num_envs, dtype=torch.bool, device=device)
        self.gamma = gamma
        self.epsilon = epsilon
        self.update = True

    def __call__(self, reward: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor,
                 envs: slice = slice(None)) -> torch.Tensor:  # fmt: skip
        """reward, terminated, truncated: [n] of the envs ``envs`` (all of them by default) -> scaled reward [n]
        (reward's dtype). The statistics take those envs' returns (a group's, ``rlfast.algos.envgroups``)."""
        returns, active = self.returns[envs], ~self.prev_dones[envs]
        new_returns = returns * self.gamma * (1 - terminated.to(returns.dtype)) + reward
        returns = torch.where(active, new_returns.to(returns.dtype), returns)
        self.returns[envs] = returns
        if self.update:
            self.rms.update(returns, mask=active)
        self.prev_dones[envs] = terminated | truncated
        return (reward / torch.sqrt(self.rms.var + self.epsilon)).to(reward.dtype)

    def state_dict(self) -> dict[str, Any]:
        return {
            "rms": self.rms.state_dict(),
            "returns": self.returns.clone(),
            "prev_dones": self.prev_dones.clone(),
            "gamma": self.gamma,
            "epsilon": self.epsilon,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rms.load_state_dict(state["rms"])
        device = self.returns.device
        self.returns = torch.as_tensor(state["returns"], dtype=torch.float32, device=device).clone()
        self.prev_dones = torch.as_tensor(state["prev_dones"], dtype=torch.bool, device=device).clone()
        self.gamma = float(state["gamma"])
        self.epsilon = float(state["epsilon"])
