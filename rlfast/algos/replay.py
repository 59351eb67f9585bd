"""A replay buffer on the training device that stores each observation once.

One ring of ``capacity // num_envs`` slots per env stream. Slot ``t`` of env ``e`` holds what that
env's step ``t`` started from and produced::

    obs        the observation o_t the action was chosen from: for Atari one 84x84 frame (pool
               ``stack_num=1``), never a stack, and never a second copy as anyone's next_obs
    action, reward, terminated, truncated   of the step from o_t
    first      o_t starts a game: stacks repeat it instead of reaching back (``rlfast.FrameStack``'s rule)

A transition is ``(stack(o_t), a_t, r_t, stack(o_{t+1}), terminated_t)``; both stacks are rebuilt at
sample time from the slots, exactly as the acting side's ``FrameStack`` saw them: the
``stack`` newest frames up to ``t``, the oldest ones replaced by the game's first frame where the
game is younger than the stack. Under next-step autoreset the step from a terminal observation is
the pool's reset step (its action ignored, reward 0): no transition, and never sampled. Under
Atari's ``episodic_life`` a life lost ends an episode (``terminated``) but not the game: the
stack runs on through the terminal and the reset observation, as it does when acting.

With ``n_step`` = n > 1 a transition looks n steps ahead, or up to the end of its episode when that comes first
(k <= n steps): ``(stack(o_t), a_t, sum_{i<k} gamma^i r_{t+i}, stack(o_{t+k}), terminated_{t+k-1})``, and
``discounts`` = gamma^k multiplies its bootstrap value (a truncated episode bootstraps from its last observation).

``sample`` draws uniformly among the transitions held (``cumsum`` + ``searchsorted`` over the valid-slot mask,
on the buffer's device): no host sync, no Python loop over samples or envs. Once an env's ring has wrapped, its
``stack - 1`` oldest slots are not sampled (older frames their stacks may need are overwritten); an env's
``n_step`` newest slots wait for the steps they look ahead to. Memory (``nbytes``): ``capacity`` x (obs bytes +
action bytes + 7 bytes); Atari at 1M transitions: 7.06 GB of frames + 16 MB.
"""

import math
from typing import Optional, Sequence, Union

import torch

Device = Union[str, torch.device]
_STATE = ("obs", "actions", "rewards", "terminated", "truncated", "first", "is_transition", "count")
"""the tensors a state_dict holds"""


class ReplayBuffer:
    """Preallocated rings of ``capacity // num_envs`` steps per env, on ``device``.

    ``add`` one step of a batch of envs (all of them in env order, or ``env_ids``); ``sample``
    ``batch_size`` transitions as a dict of tensors on the device:
    ``obs`` [B, stack * obs_shape[0], *obs_shape[1:]] (``obs_shape`` when ``stack == 1``),
    ``actions`` [B, *action_shape], ``rewards`` [B] float32, ``next_obs`` like ``obs``,
    ``dones`` [B] float32 (1.0 where the step terminated: no bootstrap; truncations bootstrap),
    ``discounts`` [B] float32 (gamma^k: the bootstrap's factor), and ``env_ids`` / ``steps`` [B]
    int64, the stream and step each transition came from. ``rewards`` are n-step returns
    discounted by ``gamma`` when ``n_step`` > 1 (see the module docstring).
    """

    def __init__(
        self,
        capacity: int,
        num_envs: int,
        obs_shape: Sequence[int],
        obs_dtype: torch.dtype = torch.float32,
        action_shape: Sequence[int] = (),
        action_dtype: torch.dtype = torch.long,
        stack: int = 1,
        device: Device = "cpu",
        n_step: int = 1,
        gamma: float = 0.99,
    ) -> None:
        if num_envs < 1 or stack < 1 or n_step < 1:
            raise ValueError(f"num_envs ({num_envs}), stack ({stack}) and n_step ({n_step}) must be >= 1")
        if not 0 <= gamma <= 1:
            raise ValueError(f"gamma must be in [0, 1], got {gamma}")
        per_env = capacity // num_envs
        if per_env < stack + n_step + 1:
            raise ValueError(
                f"capacity {capacity} gives {per_env} slots per env for {num_envs} envs; "
                f"needs at least stack + n_step + 1 = {stack + n_step + 1} per env"
            )
        self.num_envs, self.per_env, self.stack, self.n_step = num_envs, per_env, stack, n_step
        self.gamma = gamma
        self.capacity = per_env * num_envs
        self.obs_shape, self.action_shape = tuple(obs_shape), tuple(action_shape)
        self.device = torch.device(device)
        N, C = num_envs, per_env
        self.obs = torch.zeros((N, C, *self.obs_shape), dtype=obs_dtype, device=self.device)
        self.actions = torch.zeros((N, C, *self.action_shape), dtype=action_dtype, device=self.device)
        self.rewards = torch.zeros((N, C), dtype=torch.float32, device=self.device)
        self.terminated = torch.zeros((N, C), dtype=torch.bool, device=self.device)
        self.truncated = torch.zeros((N, C), dtype=torch.bool, device=self.device)
        self.first = torch.zeros((N, C), dtype=torch.bool, device=self.device)
        self.is_transition = torch.zeros((N, C), dtype=torch.bool, device=self.device)
        """the step from this slot's observation is a real transition (not the pool's reset step)"""
        self.count = torch.zeros(N, dtype=torch.long, device=self.device)
        """steps added per env (stream time of the next slot to write)"""
        self._ended = torch.zeros(N, dtype=torch.bool, device=self.device)  # the env's last step ended an episode
        self._fresh = torch.ones(N, dtype=torch.bool, device=self.device)  # the env's next add starts a new stream
        self._all_envs = torch.arange(N, device=self.device)
        self._back = torch.arange(-(stack - 1), 1, device=self.device)  # a stack's window: t-(stack-1) .. t
        self._positions = torch.arange(stack, device=self.device)
        self._ahead = torch.arange(n_step, device=self.device)  # an n-step return's steps: t .. t+n-1
        self._discounts = gamma ** torch.arange(n_step + 1, dtype=torch.float64, device=self.device)
        self._discounts = self._discounts.to(torch.float32)  # gamma^k, k = 0..n_step
        self._rows_added = 0
        self._cumsum: Optional[torch.Tensor] = None  # cumulative valid-slot counts, until the next add

    @property
    def nbytes(self) -> int:
        """Bytes of device memory the buffer holds."""
        tensors = (self.obs, self.actions, self.rewards, self.terminated, self.truncated, self.first,
                   self.is_transition, self.count, self._ended, self._fresh)  # fmt: skip
        return sum(t.numel() * t.element_size() for t in tensors)

    def __len__(self) -> int:
        """An upper bound on the transitions held, known without a device sync: the slots written
        (at most ``capacity``) less the ``n_step`` newest of each env, still waiting for their next observation."""
        return max(min(self._rows_added, self.capacity) - self.num_envs * self.n_step, 0)

    def add(
        self,
        obs: torch.Tensor,
        actions: torch.Tensor,
        rewards: torch.Tensor,
        terminated: torch.Tensor,
        truncated: torch.Tensor,
        first: Optional[torch.Tensor] = None,
        env_ids: Optional[torch.Tensor] = None,
    ) -> None:
        """One step of ``B`` envs (all ``num_envs`` in env order, or those in ``env_ids`` [B]).

        obs: [B, *obs_shape], the observations the actions were chosen from; actions: [B,
        *action_shape]; rewards, terminated, truncated: [B], what the step returned; first: [B]
        bool, the observation starts a game (``info["new_game"]`` of the result that brought it;
        None: no game starts here). An env's first step (after ``load_state_dict`` too) always
        counts as a game start. Tensors may
        live on any device (copied to the buffer's, non-blocking from pinned memory).
        """
        B = obs.shape[0]
        ids = self._all_envs if env_ids is None else env_ids.to(self.device, torch.long, non_blocking=True)
        if env_ids is None and B != self.num_envs:
            raise ValueError(f"add() got {B} observations for {self.num_envs} envs; pass env_ids for a subset")
        self._check("obs", obs, (B, *self.obs_shape), self.obs.dtype)
        self._check("actions", actions, (B, *self.action_shape), self.actions.dtype)
        for name, value in (("rewards", rewards), ("terminated", terminated), ("truncated", truncated),
                            ("first", first), ("env_ids", env_ids)):  # fmt: skip
            if value is not None and tuple(value.shape) != (B,):
                raise ValueError(f"{name} has shape {tuple(value.shape)}; expected ({B},)")

        def dev(x: torch.Tensor) -> torch.Tensor:
            return x.to(self.device, non_blocking=True)

        step = self.count[ids]
        slot = step % self.per_env
        self.obs[ids, slot] = dev(obs)
        self.actions[ids, slot] = dev(actions)
        self.rewards[ids, slot] = dev(rewards).to(torch.float32)
        term, trunc = dev(terminated).to(torch.bool), dev(truncated).to(torch.bool)
        self.terminated[ids, slot] = term
        self.truncated[ids, slot] = trunc
        fresh = self._fresh[ids]
        starts = fresh if first is None else (dev(first).to(torch.bool) | fresh)
        self._fresh[ids] = False
        self.first[ids, slot] = starts
        self.is_transition[ids, slot] = ~self._ended[ids]
        self._ended[ids] = term | trunc
        self.count[ids] = step + 1
        self._rows_added += B
        self._cumsum = None

    def state_dict(self) -> dict:
        """What ``load_state_dict`` needs to rebuild this buffer: its shape and its tensors (on its device)."""
        return {"layout": self._layout(), "rows_added": self._rows_added,
                **{name: getattr(self, name) for name in _STATE}}  # fmt: skip

    def load_state_dict(self, state: dict) -> None:
        """Fills this buffer with a ``state_dict`` of one laid out alike (ValueError naming both layouts
        otherwise). The envs go on with new streams (a resumed run's pool starts fresh episodes): each
        env's newest slot, whose next observation never came, is no transition; the slot before it
        ends an episode by truncation (n-step returns stop there and bootstrap from the newest
        observation); each env's next ``add`` starts a game."""
        if state["layout"] != self._layout():
            raise ValueError(f"a replay buffer of {state['layout']} cannot be loaded into one of {self._layout()}")
        for name in _STATE:
            getattr(self, name).copy_(state[name])
        self._rows_added = int(state["rows_added"])
        for back, flags, value in ((1, self.is_transition, False), (2, self.truncated, True)):
            has = self.count >= back
            flags[self._all_envs[has], (self.count[has] - back) % self.per_env] = value
        self._ended.zero_()
        self._fresh.fill_(True)
        self._cumsum = None

    def _layout(self) -> dict:
        return {"num_envs": self.num_envs, "per_env": self.per_env, "obs_shape": self.obs_shape,
                "obs_dtype": str(self.obs.dtype), "action_shape": self.action_shape,
                "action_dtype": str(self.actions.dtype), "stack": self.stack}  # fmt: skip

    def _check(self, name: str, value: torch.Tensor, shape: tuple, dtype: torch.dtype) -> None:
        if tuple(value.shape) != shape:
            raise ValueError(f"{name} has shape {tuple(value.shape)}; expected {shape}")
        if value.dtype != dtype:
            raise ValueError(f"{name} has dtype {value.dtype}; expected {dtype}")

    def valid(self) -> torch.Tensor:
        """[num_envs, per_env] bool: the slots whose transition can be sampled now."""
        C = self.per_env
        n = self.count[:, None]  # [N, 1]
        slot = torch.arange(C, device=self.device)[None, :]
        step = n - 1 - (n - 1 - slot) % C  # the newest stream time stored in each slot (< 0: never written)
        lo, hi = self._windows()
        return (step >= lo[:, None]) & (step <= hi[:, None]) & self.is_transition

    def _windows(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Per env, the stream times ``lo .. hi`` [N] whose transitions the ring holds whole: the stack's older
        frames still there, the ``n_step`` steps it looks ahead to already added (``valid`` is these times'
        slots less the non-transitions: a reset step's)."""
        n = self.count
        oldest = (n - self.per_env).clamp(min=0)
        return torch.where(n > self.per_env, oldest + (self.stack - 1), oldest), n - 1 - self.n_step

    def sample_indices(self, batch_size: int, generator: Optional[torch.Generator] = None) -> torch.Tensor:
        """[batch_size] flat slot indices (``env * per_env + slot``) drawn uniformly among valid slots.

        On a CPU: a stream time drawn uniformly from the envs' windows (``_windows``, one number per env) and
        redrawn where it is a reset step (rare: one per episode), which is uniform over the valid slots at a
        cost that does not grow with the capacity. Elsewhere (and after a few rounds of redraws): the rank-th
        valid slot through a cumulative count of ``valid()`` (O(capacity) after every add, but no host sync)."""
        if not 1 <= batch_size <= len(self):
            raise ValueError(f"cannot sample {batch_size} transitions: the buffer holds at most {len(self)}")
        if self.device.type == "cpu":
            lo, hi = self._windows()
            widths = (hi - lo + 1).clamp(min=0)
            ends = widths.cumsum(0)  # [N]: each env's window ends here in the envs' windows laid end to end
            if int(ends[-1]) == 0:
                raise ValueError(f"cannot sample {batch_size} transitions: none is held whole yet")
            flat = torch.empty(batch_size, dtype=torch.long)
            todo = torch.arange(batch_size)
            for _ in range(8):
                r = (torch.rand(len(todo), generator=generator, dtype=torch.float64) * ends[-1]).long()
                env = torch.searchsorted(ends, r, right=True)
                t = lo[env] + r - (ends[env] - widths[env])
                draw = env * self.per_env + t % self.per_env
                ok = self.is_transition.view(-1)[draw]
                flat[todo[ok]] = draw[ok]
                todo = todo[~ok]
                if len(todo) == 0:
                    return flat
            flat[todo] = self._rank_sample(len(todo), generator)
            return flat
        return self._rank_sample(batch_size, generator)

    def _rank_sample(self, batch_size: int, generator: Optional[torch.Generator]) -> torch.Tensor:
        """``sample_indices`` by rank among all valid slots (off the CPU, and the CPU's last resort)."""
        if self._cumsum is None:
            self._cumsum = self.valid().reshape(-1).cumsum(0)
        total = self._cumsum[-1]
        u = torch.rand(batch_size, device=self.device, generator=generator)
        rank = (u * total).long().clamp_(max=total - 1) + 1  # 1..total: the rank-th valid slot
        return torch.searchsorted(self._cumsum, rank)

    def get(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """The transitions at flat slot indices [B] (see ``sample``); any valid slots."""
        C = self.per_env
        env = torch.div(flat, C, rounding_mode="floor")
        n = self.count[env]
        t = n - 1 - (n - 1 - flat % C) % C  # stream time of each slot
        base = (env * C)[:, None]
        if self.n_step == 1:
            rewards = self.rewards.view(-1).index_select(0, flat)
            dones = self.terminated.view(-1).index_select(0, flat)
            discounts = self._discounts[1].expand(flat.shape[0])
            next_t = t + 1
        else:  # up to n steps, cut after the first end of an episode (k steps in all)
            rows = base + (t[:, None] + self._ahead) % C  # [B, n]
            terminated, ends = self.terminated.view(-1)[rows], (self.terminated | self.truncated).view(-1)[rows]
            alive = ends.cumsum(1) == ends.long()  # no end before this step: it belongs to the return
            k = alive.sum(1)
            rewards = (self.rewards.view(-1)[rows] * self._discounts[:-1] * alive).sum(1)
            dones = (terminated & alive).any(1)
            discounts = self._discounts[k]
            next_t = t + k
        # One row copy per frame of both stacks ([B, 2S] rows of the flattened rings): index_select is a
        # plain gather of contiguous rows, where two-tensor advanced indexing costs far more on a CPU.
        rows = torch.cat((self._stack_rows(base, t), self._stack_rows(base, next_t)), 1)
        B, S = flat.shape[0], self.stack
        frames = self.obs.view(-1, *self.obs_shape).index_select(0, rows.reshape(-1)).view(B, 2, S, *self.obs_shape)
        return {
            "obs": self._stacked(frames[:, 0]),
            "actions": self.actions.view(-1, *self.action_shape).index_select(0, flat),
            "rewards": rewards,
            "next_obs": self._stacked(frames[:, 1]),
            "dones": dones.to(torch.float32),
            "discounts": discounts,
            "env_ids": env,
            "steps": t,
        }

    def _stack_rows(self, base: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """[B, S] rows (of the flattened rings) of the frames of the stacks ending at stream times ``t`` [B]:
        ``t-(S-1) .. t``, where a game start inside the window replaces the frames before it by its own
        (FrameStack's rule; an env's step 0 always starts one)."""
        C = self.per_env
        window = t[:, None] + self._back
        starts = self.first.view(-1)[base + window % C] & (window >= 0)
        cut = torch.where(starts, self._positions, 0).amax(1, keepdim=True)
        return base + window.gather(1, torch.maximum(self._positions, cut)) % C

    def sample(self, batch_size: int, generator: Optional[torch.Generator] = None) -> dict[str, torch.Tensor]:
        """``batch_size`` transitions drawn uniformly (with replacement) among those held; see the class."""
        return self.get(self.sample_indices(batch_size, generator))

    def _stacked(self, frames: torch.Tensor) -> torch.Tensor:
        """[B, S, *obs_shape] -> [B, S * obs_shape[0], *obs_shape[1:]] (the pool's stacking), or [B, *obs_shape]."""
        if self.stack == 1:
            return frames[:, 0]
        return frames.reshape(frames.shape[0], -1, *self.obs_shape[1:])  # a view of the gathered rows: no copy


def format_bytes(n: int) -> str:
    """``7.06 GB``-style (powers of 1000, as the docs' memory figures)."""
    if n < 1000:
        return f"{n} B"
    exp = min(int(math.log(n, 1000)), 4)
    return f"{n / 1000**exp:.2f} {' kMGT'[exp]}B"
