"""APPO's trajectories (Sample Factory's rollout storage): what the sampler fills and one learner batch holds.

Trajectories       K trajectories of T steps on the training device: what one learner batch holds
TrajectoryBuilder  per-env trajectories assembled from the pool's (sync or async) result batches,
                   handed on K complete ones at a time

The sampler thread that fills them is ``rlfast/algos/appo_sampler.py``; the loss that reads them,
``rlfast/algos/appo.py``.
"""

from typing import Any, Callable, Optional, Sequence

import torch

from rlfast.algos.obs import assign, each, zeros as obs_zeros


class Trajectories:
    """K trajectories of T steps, [K, T] tensors on ``device`` (``obs`` [K, T + 1]: the observation after the
    last step closes each). Row t of a trajectory: the observation ``obs[:, t]`` an action was chosen from,
    that action, its log-probability under the acting weights, the acting weights' ``versions``, and what
    the step returned (``rewards``, ``terminated``, ``truncated``); a Dict env's ``obs`` is a dict of such tensors,
    one per key; ``reset`` marks the pool's reset steps
    (the step after an episode end: no transition, left out of the losses).

    With a recurrent policy (``state_shape``, its per-env state [S, H]) also ``state`` [K, S, H], the state
    each trajectory's first observation was acted on from, and ``starts`` [K, T], true where ``obs[:, t]``
    starts an episode (the state was zeroed before it); ``obs[:, T]`` starts one where step T - 1 was a reset."""

    FIELDS = ("obs", "actions", "logprobs", "versions", "reset", "rewards", "terminated", "truncated")
    RECURRENT_FIELDS = ("state", "starts")

    def __init__(self, K: int, T: int, obs_spec: Any, action_shape: Sequence[int], action_dtype: torch.dtype,
                 device: torch.device, state_shape: Optional[Sequence[int]] = None) -> None:  # fmt: skip
        """``obs_spec``: the observations' (shape, dtype), or a dict of them (``rlfast.algos.obs.spec``)."""
        def zeros(shape: tuple, dtype: torch.dtype) -> torch.Tensor:
            return torch.zeros(shape, dtype=dtype, device=device)

        self.obs = obs_zeros((K, T + 1), obs_spec, device)
        self.actions = zeros((K, T, *action_shape), action_dtype)
        self.logprobs = zeros((K, T), torch.float32)
        self.versions = zeros((K, T), torch.long)
        self.reset = zeros((K, T), torch.bool)
        self.rewards = zeros((K, T), torch.float32)
        self.terminated = zeros((K, T), torch.bool)
        self.truncated = zeros((K, T), torch.bool)
        self.fields = self.FIELDS
        if state_shape is not None:
            self.state = zeros((K, *state_shape), torch.float32)
            self.starts = zeros((K, T), torch.bool)
            self.fields = self.FIELDS + self.RECURRENT_FIELDS

    def rows(self, index: torch.Tensor) -> dict[str, torch.Tensor]:
        """The trajectories at ``index`` [k] as a dict of [k, ...] tensors."""
        return {name: each(lambda x: x.index_select(0, index), getattr(self, name)) for name in self.fields}


class TrajectoryBuilder:
    """Assembles each env's steps into trajectories of ``T`` steps and hands complete ones on, ``K`` per
    ``Trajectories`` batch, in the order they complete (an env's trajectories in its own order).

    Per result batch of envs ``env_ids``: ``observe`` records what their previous steps returned (and
    closes the trajectories that reached T steps with these observations); ``act`` records the steps
    they now take. ``take_free()`` gives an empty batch to fill (it may block: the learner's
    backpressure), ``emit(batch)`` passes a full one on. Bookkeeping per env lives on the host
    (``env_ids`` come from the pool there): no device sync.
    """

    def __init__(self, num_envs: int, T: int, K: int, make: Callable[[int], Trajectories],
                 take_free: Callable[[], Trajectories], emit: Callable[[Trajectories], None]) -> None:  # fmt: skip
        self.T, self.K = T, K
        self.current = make(num_envs)  # [N, T + 1]: each env's trajectory in progress
        self.device = self.current.actions.device
        self.take_free, self.emit = take_free, emit
        self.pos = torch.zeros(num_envs, dtype=torch.long)  # steps taken in each env's current trajectory
        self.pending = torch.zeros(num_envs, dtype=torch.bool)  # an action was sent, its result not yet observed
        self.ended = torch.zeros(num_envs, dtype=torch.bool)  # the env's last step ended an episode
        self.was_reset = torch.ones(num_envs, dtype=torch.bool)  # its last step was a reset step (or none yet)
        self._out: Optional[Trajectories] = None
        self._filled = 0

    def _dev(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(self.device, non_blocking=True)

    def observe(self, env_ids: torch.Tensor, obs: torch.Tensor, rewards: torch.Tensor, terminated: torch.Tensor,
                truncated: torch.Tensor) -> None:  # fmt: skip
        """The results of the previous steps of ``env_ids`` [B] (host): ``obs`` [B, ...], rewards, end flags [B]."""
        ids = env_ids.long()
        pending = self.pending[ids]
        if not bool(pending.any()):
            return
        envs, pos = ids[pending], self.pos[ids[pending]]
        e, p = self._dev(envs), self._dev(pos - 1)
        term, trunc = terminated[pending].bool(), truncated[pending].bool()
        cur = self.current
        cur.rewards[e, p] = self._dev(rewards[pending].float())
        cur.terminated[e, p] = self._dev(term)
        cur.truncated[e, p] = self._dev(trunc)
        self.ended[envs] = term | trunc
        self.pending[envs] = False
        full = pos == self.T
        if bool(full.any()):
            done = envs[full]
            assign(cur.obs, (self._dev(done), self.T), each(lambda o: self._dev(o[pending][full]), obs))
            self._hand_on(self._dev(done))
            self.pos[done] = 0

    def starts(self, env_ids: torch.Tensor) -> torch.Tensor:
        """[B] (host): whether the observations ``env_ids`` now act on start an episode (their last step was a
        reset step, or they have taken none): where a recurrent policy zeroes their state."""
        return self.was_reset[env_ids.long()]

    def act(self, env_ids: torch.Tensor, obs: torch.Tensor, actions: torch.Tensor, logprobs: torch.Tensor,
            version: int, state: Optional[torch.Tensor] = None) -> None:  # fmt: skip
        """The steps ``env_ids`` [B] (host) now take: from ``obs`` [B, ...] (device), ``actions``, ``logprobs`` [B]
        under weights ``version``; a recurrent policy's ``state`` [B, S, H] (device) is the one they acted from."""
        ids = env_ids.long()
        e, p = self._dev(ids), self._dev(self.pos[ids])
        cur = self.current
        assign(cur.obs, (e, p), obs)
        cur.actions[e, p] = actions.to(cur.actions.dtype)
        cur.logprobs[e, p] = logprobs
        cur.versions[e, p] = version
        reset = self.ended[ids]
        cur.reset[e, p] = self._dev(reset)
        if state is not None:
            cur.starts[e, p] = self._dev(self.was_reset[ids])
            rows = (self.pos[ids] == 0).nonzero().flatten()  # trajectories that begin: the state they unroll from
            if len(rows):
                cur.state[self._dev(ids[rows])] = state.index_select(0, self._dev(rows))
        self.was_reset[ids] = reset
        self.pos[ids] += 1
        self.pending[ids] = True

    def _hand_on(self, envs: torch.Tensor) -> None:
        """Copies the complete trajectories of ``envs`` (device) into batches, emitting each full one."""
        start = 0
        while start < len(envs):
            if self._out is None:
                self._out, self._filled = self.take_free(), 0
            n = min(self.K - self._filled, len(envs) - start)
            src = envs[start : start + n]
            for name in self.current.fields:
                assign(getattr(self._out, name), slice(self._filled, self._filled + n),
                       each(lambda x: x[src], getattr(self.current, name)))
            self._filled += n
            start += n
            if self._filled == self.K:
                out, self._out = self._out, None
                self.emit(out)
