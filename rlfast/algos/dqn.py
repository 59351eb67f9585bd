"""DQN (Mnih et al. 2015) as in CleanRL, for the DQN trainers in ``scripts/``.

DQNArgs         CleanRL's dqn.py hyperparameters, plus num_envs, replay_ratio, Double DQN, n-step returns, ...
linear_schedule CleanRL's epsilon schedule
anneal_lr       with --anneal-lr, the learning rate of an env step (DQNArgs.lr) into the optimizer
epsilon_greedy  random actions with probability epsilon, per env; the Q-network runs only if some env is greedy
td_loss         the TD loss against a target network (optionally Double DQN; n-step via the batch)
soft_update     target <- tau * online + (1 - tau) * target
ReplayRatio     when to learn: gradient steps at the replay ratio, target updates (each script holds its update)
replay_buffer   the trainer's ReplayBuffer (--prioritized: a PrioritizedReplayBuffer), its size printed, saved
                with checkpoints under --save-replay
"""

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from rlfast.algos.flags import Flags, bounded
from rlfast.algos.prioritized import PrioritizedReplayBuffer
from rlfast.algos.replay import ReplayBuffer, format_bytes


@dataclass
class DQNArgs(Flags):
    """CleanRL's ``dqn.py`` hyperparameters (its defaults); a DQN script's ``Args`` composes this with
    ``RunArgs``."""

    num_envs: int = 1
    learning_rate: float = bounded(2.5e-4, low=0, low_open=True)
    """the learning rate of the optimizer"""
    buffer_size: int = bounded(10000, low=1)
    """the replay memory buffer size (transitions, shared by all envs)"""
    gamma: float = bounded(0.99, low=0, high=1)
    """the discount factor gamma"""
    tau: float = bounded(1.0, low=0, high=1)
    """the target network update rate (1: hard copy)"""
    target_network_frequency: int = bounded(500, low=1)
    """env steps between target network updates"""
    batch_size: int = bounded(128, low=1)
    """transitions sampled from the replay memory per gradient step: CleanRL's --batch-size (not the pool's
    batch_size, envs per recv)"""
    start_e: float = bounded(1.0, low=0, high=1)
    """the starting epsilon for exploration"""
    end_e: float = bounded(0.05, low=0, high=1)
    """the ending epsilon for exploration"""
    exploration_fraction: float = bounded(0.5, low=0, low_open=True)
    """the fraction of `total-timesteps` it takes from start-e to go end-e"""
    learning_starts: int = 10000
    """env steps before learning starts"""
    replay_ratio: float = bounded(12.8, low=0, low_open=True)
    """sampled transitions per env step: batch_size x gradient steps / env steps (CleanRL: 128 every 10 steps)"""
    num_steps: int = bounded(100, low=1)
    """steps per env per iteration, as PPO's --num-steps (what one log line and one checkpoint-schedule tick
    cover)"""
    double_dqn: bool = False
    """Double DQN targets: the online network picks the next action, the target network values it"""
    n_step: int = bounded(1, low=1)
    """n-step returns: learn from the discounted rewards of up to n steps (fewer where the episode ends) and
    the value n steps ahead (1: CleanRL's one-step targets)"""
    adam_eps: float = bounded(1e-8, low=0, low_open=True)
    """Adam's epsilon (CleanRL: torch's 1e-8; Hessel et al. 2018's Rainbow and Dopamine: 1.5e-4, which keeps the
    steps of rarely-updated weights small)"""
    anneal_lr: bool = False
    """anneal the learning rate linearly from --learning-rate to 0 at --total-timesteps (CleanRL's PPO schedule;
    off: a constant rate, as in CleanRL's DQN)"""
    huber: bool = False
    """the Huber (smooth L1) TD loss, Mnih et al. 2015's clipping of the TD error to [-1, 1] in the gradient, as
    Dopamine and SB3 use it (CleanRL: the squared error)"""
    prioritized: bool = False
    """proportional prioritized replay (Schaul et al. 2016): transitions drawn with probability ~ (|TD error| +
    --priority-eps) ** --priority-alpha, new ones at the largest priority so far, the loss weighted by the
    importance-sampling correction, its exponent from --priority-beta to 1 at --total-timesteps (CleanRL:
    uniform replay)"""
    priority_alpha: float = bounded(0.5, low=0)
    """how much the priorities count (0: uniform; Rainbow's 0.5, Schaul et al.'s proportional variant 0.6)"""
    priority_beta: float = bounded(0.4, low=0, high=1)
    """the importance-sampling exponent at the start, annealed linearly to 1 (Schaul et al. and Rainbow: 0.4)"""
    priority_eps: float = bounded(1e-6, low=0, low_open=True)
    """added to |TD error| so that no transition's priority is 0"""
    save_replay: bool = False
    """also save the replay buffer (`replay_buffer.pt` in the run dir; its size is printed at start-up) with
    every `checkpoint.pt`, so that --resume goes on with it rather than with an empty one"""

    @property
    def steps_per_iteration(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def num_iterations(self) -> int:
        return self.total_timesteps // max(self.steps_per_iteration, 1)  # validate() reports a zero

    def epsilon(self, global_step: int) -> float:
        """The exploration at env step ``global_step``: CleanRL's linear schedule from --start-e to --end-e over
        --exploration-fraction of --total-timesteps."""
        return linear_schedule(self.start_e, self.end_e, self.exploration_fraction * self.total_timesteps, global_step)

    def lr(self, global_step: int) -> float:
        """The learning rate at env step ``global_step``: --learning-rate, or with --anneal-lr its share
        ``1 - global_step / --total-timesteps`` (not below 0)."""
        if not self.anneal_lr:
            return self.learning_rate
        return self.learning_rate * max(1.0 - global_step / self.total_timesteps, 0.0)

    def beta(self, global_step: int) -> float:
        """The importance-sampling exponent at env step ``global_step`` under --prioritized: --priority-beta
        linearly to 1 at --total-timesteps."""
        return min(self.priority_beta + (1.0 - self.priority_beta) * global_step / self.total_timesteps, 1.0)

    def validate(self) -> list[str]:
        problems = super().validate()
        if not problems:
            # Each env's ring: its share of a batch, plus a 4-frame stack's history and the n-step look-ahead.
            extra = self.n_step + 4
            least = self.num_envs * (math.ceil(self.batch_size / self.num_envs) + extra)
            if self.buffer_size < least:
                problems.append(f"--buffer-size {self.buffer_size} must hold --batch-size {self.batch_size} "
                                f"transitions and {extra} more steps per env: at least {least}")  # fmt: skip
        if not self.prioritized:
            unused = [f"--{name.replace('_', '-')}" for name in ("priority_alpha", "priority_beta", "priority_eps")
                      if getattr(self, name) != getattr(type(self), name)]  # fmt: skip
            if unused:
                problems.append(f"{', '.join(unused)}: no effect without --prioritized")
        if self.learning_starts < self.batch_size:
            problems.append(f"--learning-starts {self.learning_starts} must be >= --batch-size {self.batch_size}")
        return problems


def linear_schedule(start_e: float, end_e: float, duration: float, t: int) -> float:
    """Epsilon at env step ``t``: from ``start_e`` linearly to ``end_e`` over ``duration`` steps, then flat."""
    slope = (end_e - start_e) / duration
    return max(slope * t + start_e, end_e)


def anneal_lr(optimizer: torch.optim.Optimizer, args: DQNArgs, global_step: int) -> None:
    """With ``args.anneal_lr``, sets the learning rate of env step ``global_step`` (``DQNArgs.lr``)."""
    if args.anneal_lr:
        for group in optimizer.param_groups:
            group["lr"] = args.lr(global_step)


def epsilon_greedy(
    q_network: Callable[[torch.Tensor], torch.Tensor],
    obs: torch.Tensor,
    epsilon: float,
    num_actions: int,
    generator: Optional[torch.Generator] = None,
) -> torch.Tensor:
    """obs: [N, ...] -> actions [N] int64: uniform random with probability ``epsilon`` (per env), else the argmax
    of ``q_network(obs)``. The network runs only when some env acts greedily (CleanRL's shortcut: no forward
    pass while every env explores, most steps early in a one-env run); the random draws come first either way,
    so skipping it changes no action."""
    n = obs.shape[0]
    explore = torch.rand(n, device=obs.device, generator=generator) < epsilon
    random = torch.randint(num_actions, (n,), device=obs.device, generator=generator)
    if bool(explore.all()):  # one host read of N bools; the actions go to the host for the envs right after
        return random
    return torch.where(explore, random, q_network(obs).argmax(1))


def td_loss(
    q_network: nn.Module, target_network: nn.Module, batch: dict[str, torch.Tensor], double: bool = False,
    huber: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """CleanRL's DQN loss on a replay batch (``ReplayBuffer.sample``): MSE between Q(s, a) and
    ``r + discount * (1 - done) * Q_target(s', a')``, a' the target's argmax (Double DQN: the online
    network's); ``discount`` is the batch's, gamma^k (gamma for one-step transitions, gamma^k for
    n-step returns over k steps). ``huber``: the Huber loss (smooth L1, delta 1) instead of MSE. A batch with
    ``weights`` (prioritized replay's importance-sampling correction) weights each transition's loss in the mean.
    Returns ``(loss, mean Q(s, a), TD errors [B])`` on the device, the TD errors detached (the new priorities)."""
    with torch.no_grad():
        next_q = target_network(batch["next_obs"])
        if double:
            next_value = next_q.gather(1, q_network(batch["next_obs"]).argmax(1, keepdim=True)).squeeze(1)
        else:
            next_value = next_q.max(1).values
        target = batch["rewards"] + batch["discounts"] * next_value * (1.0 - batch["dones"])
    q = q_network(batch["obs"]).gather(1, batch["actions"].long().unsqueeze(1)).squeeze(1)
    if "weights" in batch:
        each = F.smooth_l1_loss(q, target, reduction="none") if huber else F.mse_loss(q, target, reduction="none")
        loss = (batch["weights"] * each).mean()
    else:
        loss = F.smooth_l1_loss(q, target) if huber else F.mse_loss(q, target)
    return loss, q.detach().mean(), (target - q).detach()


@torch.no_grad()
def soft_update(target: nn.Module, online: nn.Module, tau: float) -> None:
    """``target <- tau * online + (1 - tau) * target``, parameter by parameter (tau 1: a copy); buffers (the pixel
    statistics of --normalize-frames) are copied, whatever tau."""
    for t, o in zip(target.parameters(), online.parameters()):
        t.copy_(tau * o + (1.0 - tau) * t)
    for t, o in zip(target.buffers(), online.buffers()):
        t.copy_(o)


class ReplayRatio:
    """When DQN learns, asked once per vector step: gradient steps at ``replay_ratio`` sampled transitions per
    env step once ``learning_starts`` env steps have passed and the buffer holds a batch (fractions carry
    over), and a target update every ``target_network_frequency`` env steps. The steps themselves are the
    script's ``update``."""

    def __init__(self, args: DQNArgs, global_step: int) -> None:
        self.args = args
        self.due = 0.0  # gradient steps owed (fractional)
        self.next_target = global_step + args.target_network_frequency

    def gradient_steps(self, global_step: int, new_steps: int, buffered: int) -> int:
        """The gradient steps due after ``new_steps`` more env steps (``global_step`` in all), ``buffered``
        transitions in the buffer."""
        args = self.args
        if global_step > args.learning_starts and buffered >= args.batch_size:
            self.due += args.replay_ratio * new_steps / args.batch_size
        n = int(self.due)
        self.due -= n
        return n

    def target_update(self, global_step: int) -> bool:
        """Whether the target network is due for its update at ``global_step`` (then the next one is scheduled)."""
        if global_step < self.next_target:
            return False
        self.next_target += self.args.target_network_frequency
        return True


def replay_buffer(
    args: DQNArgs,
    obs_shape: Sequence[int],
    obs_dtype: torch.dtype,
    device: torch.device,
    save_with_checkpoint: Callable[[str, Any], Optional[Path]],
    resumed: bool,
    stack: int = 1,
) -> ReplayBuffer:
    """The DQN trainers' replay buffer on ``device`` (``--buffer-size``, ``--n-step``, ``--gamma``), its size
    printed; with ``--save-replay`` handed to ``save_with_checkpoint`` (``Run.save_with_checkpoint``: saved with
    every ``checkpoint.pt``, restored on --resume). ``resumed``: a resumed run, whose buffer starts empty
    without --save-replay (a note says so)."""
    kwargs = {"stack": stack, "device": device, "n_step": args.n_step, "gamma": args.gamma}
    if args.prioritized:
        kwargs.update(alpha=args.priority_alpha, beta=args.beta(0), eps=args.priority_eps)
    rb = (PrioritizedReplayBuffer if args.prioritized else ReplayBuffer)(
        args.buffer_size, args.num_envs, obs_shape, obs_dtype, **kwargs)
    kind = f"prioritized (alpha {args.priority_alpha}), " if args.prioritized else ""
    saved = "; saved with every checkpoint.pt (--save-replay)" if args.save_replay else ""
    print(f"replay buffer: {kind}{rb.capacity:,} transitions, {format_bytes(rb.nbytes)} on {device}{saved}", flush=True)
    if args.save_replay:
        if (path := save_with_checkpoint("replay_buffer.pt", rb)) is not None:
            print(f"replay buffer: restored from {path}", flush=True)
    elif resumed:
        print("note: the replay buffer starts empty (it is saved only with --save-replay)", flush=True)
    return rb
