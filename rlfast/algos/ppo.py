"""PPO (Schulman et al. 2017) as in CleanRL, for the PPO trainers in ``scripts/``.

PPOArgs        CleanRL's PPO hyperparameters on top of the run layer's flags (scripts override defaults)
Rollout        T x B rollout storage on the training device (episode statistics on the host)
ppo_loss       clipped surrogate, optionally clipped value loss, entropy bonus, diagnostics
ppo_update     CleanRL's epochs of shuffled minibatches over a flattened rollout
learn          one iteration's update: GAE(lambda) over the rollout, then ppo_update; the losses/* scalars
"""

import math
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any, Callable, ContextManager, Iterable, Iterator, Mapping, NamedTuple, Optional, Sequence, Union

import torch
from torch import nn

from rlfast.algos.distributed import World, all_reduce_gradients, all_reduce_sum
from rlfast.algos.gae import gae
from rlfast.algos.run import RunArgs


@dataclass
class PPOArgs(RunArgs):
    """CleanRL's ``ppo.py`` hyperparameters (its defaults); a PPO script's ``Args`` extends this."""

    learning_rate: float = 2.5e-4
    """the learning rate of the optimizer"""
    num_steps: int = 128
    """steps per env per rollout"""
    anneal_lr: bool = True
    """anneal the learning rate linearly to 0"""
    gamma: float = 0.99
    """the discount factor gamma"""
    gae_lambda: float = 0.95
    """the lambda for generalized advantage estimation"""
    num_minibatches: int = 4
    """the number of minibatches per epoch"""
    update_epochs: int = 4
    """the number of epochs over each rollout"""
    norm_adv: bool = True
    """normalize advantages per minibatch"""
    clip_coef: float = 0.2
    """the surrogate clipping coefficient"""
    clip_vloss: bool = True
    """clip the value loss as in the PPO paper's code"""
    ent_coef: float = 0.01
    """coefficient of the entropy bonus"""
    vf_coef: float = 0.5
    """coefficient of the value loss"""
    max_grad_norm: float = 0.5
    """the maximum norm for gradient clipping"""
    target_kl: Optional[float] = None
    """stop an update's epochs early once the approx KL exceeds this"""
    kl_adaptive_lr: Optional[float] = None
    """a KL target that steers the learning rate (rl_games' and Sample Factory's adaptive schedule): after each
    epoch, lr / 1.5 when the epoch's mean approx KL is above twice this, lr x 1.5 when below half of it, within
    [1e-6, --lr-max]; --learning-rate is where it starts. Needs --no-anneal-lr (None: off, CleanRL)"""
    lr_max: float = 1e-2
    """the largest learning rate --kl-adaptive-lr may reach"""
    kl_coef: float = 0.0
    """weight of a KL penalty in the loss: the mean of (ratio - 1) - log(ratio), an estimate of KL(rollout policy ||
    current policy) (Sample Factory's kl_loss_coeff for MuJoCo; 0: none, CleanRL)"""
    bootstrap_truncated: bool = False
    """bootstrap the value at time-limit truncations from the final observation (rl_games' value_bootstrap);
    off: every episode end is a termination (CleanRL)"""

    @property
    def batch_size(self) -> int:
        return self.num_envs * self.num_steps

    @property
    def minibatch_size(self) -> int:
        return self.batch_size // self.num_minibatches

    @property
    def num_iterations(self) -> int:
        return self.total_timesteps // max(self.batch_size, 1)  # validate() reports a zero batch

    def validate(self) -> list[str]:
        problems = super().validate()
        for flag, value in (("--num-steps", self.num_steps), ("--num-minibatches", self.num_minibatches),
                            ("--update-epochs", self.update_epochs)):  # fmt: skip
            if value < 1:
                problems.append(f"{flag} must be >= 1, got {value}")
        if not problems and self.batch_size % self.num_minibatches:
            problems.append(f"the batch of {self.batch_size} steps (num_envs x num_steps) is not divisible by "
                            f"--num-minibatches {self.num_minibatches}")  # fmt: skip
        for flag, value in (("--learning-rate", self.learning_rate), ("--clip-coef", self.clip_coef),
                            ("--max-grad-norm", self.max_grad_norm), ("--target-kl", self.target_kl),
                            ("--kl-adaptive-lr", self.kl_adaptive_lr), ("--lr-max", self.lr_max)):  # fmt: skip
            if value is not None and not 0 < value < math.inf:
                problems.append(f"{flag} must be > 0, got {value}")
        for flag, value in (("--gamma", self.gamma), ("--gae-lambda", self.gae_lambda)):
            if not 0 <= value <= 1:
                problems.append(f"{flag} must be in [0, 1], got {value}")
        for flag, value in (("--ent-coef", self.ent_coef), ("--vf-coef", self.vf_coef), ("--kl-coef", self.kl_coef)):
            if not 0 <= value < math.inf:
                problems.append(f"{flag} must be >= 0, got {value}")
        if self.kl_adaptive_lr is not None and self.anneal_lr:
            problems.append("--kl-adaptive-lr sets the learning rate itself: add --no-anneal-lr")
        if self.kl_adaptive_lr is not None and self.lr_max < self.learning_rate:
            problems.append(f"--lr-max {self.lr_max} is below --learning-rate {self.learning_rate}")
        return problems


class Rollout:
    """Storage for one rollout of ``T`` steps of ``B`` envs.

    On ``device``: ``obs`` [T, B, *obs_shape], ``actions`` [T, B, *action_shape], and ``logprobs``,
    ``rewards``, ``dones``, ``terminations`` (the part of ``dones`` that is not a time limit; stored only by
    trainers that bootstrap truncations), ``values`` [T, B] float32. On the host, where the pool writes them:
    ``ep_done`` [T, B] bool (an episode ended with this step), ``ep_return`` [T, B] float32,
    ``ep_length`` [T, B] int32 (its totals), as ``RunLog.episodes`` takes them (``episodes``).
    """

    def __init__(
        self,
        num_steps: int,
        num_envs: int,
        obs_shape: Sequence[int],
        action_shape: Sequence[int] = (),
        obs_dtype: torch.dtype = torch.float32,
        action_dtype: torch.dtype = torch.long,
        device: Union[str, torch.device] = "cpu",
    ) -> None:
        T, B = num_steps, num_envs
        self.obs = torch.zeros((T, B, *obs_shape), dtype=obs_dtype, device=device)
        self.actions = torch.zeros((T, B, *action_shape), dtype=action_dtype, device=device)
        self.logprobs = torch.zeros((T, B), device=device)
        self.rewards = torch.zeros((T, B), device=device)
        self.dones = torch.zeros((T, B), device=device)
        self.terminations = torch.zeros((T, B), device=device)
        self.values = torch.zeros((T, B), device=device)
        self.ep_done = torch.zeros((T, B), dtype=torch.bool)
        self.ep_return = torch.zeros((T, B))
        self.ep_length = torch.zeros((T, B), dtype=torch.int32)

    def store(self, index: Any, **values: torch.Tensor) -> None:
        """Writes one step's values into the named fields at ``index`` (``t``, or ``(t, envs)``), e.g.
        ``store(t, actions=a, logprobs=lp)``; copies from pinned host memory do not block."""
        for name, value in values.items():
            getattr(self, name)[index].copy_(value, non_blocking=True)

    def store_episodes(self, index: Any, terminated: torch.Tensor, truncated: torch.Tensor, info: Mapping) -> None:
        """Episode ends and the pool's episode totals (``info["episode_return"]``, ``["episode_length"]``)
        of one step result, at ``index``."""
        torch.logical_or(terminated, truncated, out=self.ep_done[index])
        self.ep_return[index].copy_(info["episode_return"])
        self.ep_length[index].copy_(info["episode_length"])

    @property
    def episodes(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(ep_done, ep_return, ep_length)``: what ``Run.end_iteration`` logs."""
        return self.ep_done, self.ep_return, self.ep_length

    def batch(self, advantages: torch.Tensor, returns: torch.Tensor) -> dict[str, torch.Tensor]:
        """The rollout flattened to rows [T * B, ...] with its advantages and returns, as ppo_update takes it."""
        n = self.rewards.numel()
        return {
            "obs": self.obs.reshape(n, *self.obs.shape[2:]),
            "actions": self.actions.reshape(n, *self.actions.shape[2:]),
            "logprobs": self.logprobs.reshape(-1), "advantages": advantages.reshape(-1),
            "returns": returns.reshape(-1), "values": self.values.reshape(-1),
        }  # fmt: skip


class PPOLoss(NamedTuple):
    """Scalar tensors (no ``.item()``: read them once per iteration, off the hot path)."""

    loss: torch.Tensor
    """policy_loss - ent_coef * entropy + vf_coef * value_loss (+ kl_coef * approx_kl): what to backpropagate."""
    policy_loss: torch.Tensor
    value_loss: torch.Tensor
    entropy: torch.Tensor
    old_approx_kl: torch.Tensor
    """mean(-log ratio): the naive KL estimator."""
    approx_kl: torch.Tensor
    """mean((ratio - 1) - log ratio): the low-variance, always >= 0 estimator (Schulman's k3)."""
    clipfrac: torch.Tensor
    """Fraction of samples with |ratio - 1| > clip_coef."""


def normalize_advantages(
    advantages: torch.Tensor,
    eps: float = 1e-8,
    weights: Optional[torch.Tensor] = None,
    mean_std: Optional[tuple[torch.Tensor, torch.Tensor]] = None,
) -> torch.Tensor:
    """``(a - mean) / (std + eps)`` over all of ``advantages`` (CleanRL's per-minibatch norm_adv), or over
    the samples ``weights`` (0/1) keeps, or with a given ``mean_std`` (a minibatch's over all ranks)."""
    if mean_std is not None:
        mean, std = mean_std
        return ((advantages - mean) / (std + eps)).to(advantages.dtype)
    if weights is None:
        return (advantages - advantages.mean()) / (advantages.std() + eps)
    n = weights.sum()
    mean = (advantages * weights).sum() / n.clamp(min=1)
    var = (((advantages - mean) ** 2) * weights).sum() / (n - 1).clamp(min=1)
    return (advantages - mean) / (var.sqrt() + eps)


def weighted_mean(x: torch.Tensor, weights: Optional[torch.Tensor] = None) -> torch.Tensor:
    """``x.mean()``, or the mean over the samples ``weights`` (0/1) keeps (0 when it keeps none)."""
    return x.mean() if weights is None else (x * weights).sum() / weights.sum().clamp(min=1)


def ppo_loss(
    newlogprob: torch.Tensor,
    oldlogprob: torch.Tensor,
    advantages: torch.Tensor,
    newvalue: torch.Tensor,
    oldvalue: torch.Tensor,
    returns: torch.Tensor,
    entropy: torch.Tensor,
    clip_coef: float,
    ent_coef: float,
    vf_coef: float,
    clip_vloss: bool = True,
    vf_clip_coef: Optional[float] = None,
    norm_adv: bool = True,
    weights: Optional[torch.Tensor] = None,
    kl_coef: float = 0.0,
) -> PPOLoss:
    """CleanRL's PPO minibatch loss.

    Args:
        newlogprob: [N] log pi(a|s) under the current parameters (carries gradients).
        oldlogprob: [N] log pi(a|s) at rollout time.
        advantages: [N] advantage estimates (normalized here when ``norm_adv``).
        newvalue: [N] current critic output (carries gradients).
        oldvalue: [N] critic output at rollout time.
        returns: [N] value targets (advantages + values at rollout time).
        entropy: [N] policy entropy at each state (carries gradients).
        clip_coef: ratio clip range epsilon.
        ent_coef: entropy bonus weight.
        vf_coef: value loss weight.
        clip_vloss: use ``max(unclipped, clipped)`` squared error with ``oldvalue +
            clamp(newvalue - oldvalue, -c, c)`` (c = ``vf_clip_coef`` or ``clip_coef``).
        vf_clip_coef: value clip range; defaults to ``clip_coef`` (CleanRL).
        norm_adv: normalize advantages over this minibatch.
        weights: [N] 0/1: the samples the loss and its diagnostics average over (None: all).
        kl_coef: weight of ``approx_kl`` as a penalty in the loss (its gradient flows only then).
    """
    logratio = newlogprob - oldlogprob
    ratio = logratio.exp()
    with torch.set_grad_enabled(kl_coef > 0 and torch.is_grad_enabled()):
        approx_kl = weighted_mean((ratio - 1) - logratio, weights)
    with torch.no_grad():
        old_approx_kl = weighted_mean(-logratio, weights)
        clipfrac = weighted_mean(((ratio - 1.0).abs() > clip_coef).float(), weights)

    if norm_adv:
        advantages = normalize_advantages(advantages, weights=weights)
    pg_loss1 = -advantages * ratio
    pg_loss2 = -advantages * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)
    policy_loss = weighted_mean(torch.max(pg_loss1, pg_loss2), weights)

    if clip_vloss:
        c = clip_coef if vf_clip_coef is None else vf_clip_coef
        v_loss_unclipped = (newvalue - returns) ** 2
        v_clipped = oldvalue + torch.clamp(newvalue - oldvalue, -c, c)
        v_loss_clipped = (v_clipped - returns) ** 2
        value_loss = 0.5 * weighted_mean(torch.max(v_loss_unclipped, v_loss_clipped), weights)
    else:
        value_loss = 0.5 * weighted_mean((newvalue - returns) ** 2, weights)

    entropy_mean = weighted_mean(entropy, weights)
    loss = policy_loss - ent_coef * entropy_mean + vf_coef * value_loss
    if kl_coef > 0:
        loss = loss + kl_coef * approx_kl
    return PPOLoss(loss, policy_loss, value_loss, entropy_mean, old_approx_kl, approx_kl.detach(), clipfrac)


def explained_variance(y_pred: torch.Tensor, y_true: torch.Tensor) -> torch.Tensor:
    """``1 - Var[y_true - y_pred] / Var[y_true]`` (NaN when ``y_true`` is constant), [N] -> scalar."""
    var_y = y_true.var()
    return torch.where(var_y == 0, torch.full_like(var_y, float("nan")), 1 - (y_true - y_pred).var() / var_y)


LOSS_NAMES = ("policy_loss", "value_loss", "entropy", "old_approx_kl", "approx_kl", "clipfrac")
"""The PPOLoss fields after ``loss``, in the order ``ppo_update`` returns their means."""


def ppo_update(
    loss_fn: Callable[[dict[str, torch.Tensor]], PPOLoss],
    optimizer: torch.optim.Optimizer,
    params: Iterable[torch.Tensor],
    batch: Mapping[str, torch.Tensor],
    *,
    update_epochs: int,
    num_minibatches: int,
    max_grad_norm: float,
    target_kl: Optional[float] = None,
    kl_adaptive_lr: Optional[float] = None,
    lr_max: float = 1e-2,
    norm_adv: bool = False,
    world: World = World(),
    num_envs: Optional[int] = None,
    comm: Callable[[], ContextManager] = nullcontext,
) -> torch.Tensor:
    """CleanRL's update: ``update_epochs`` shuffled passes of ``num_minibatches`` Adam steps.

    ``batch`` holds the flattened rollout, every tensor [N, ...] on one device; ``loss_fn``
    gets the minibatch as the same dict of [N / num_minibatches, ...] rows. With ``norm_adv`` the
    minibatch's advantages are normalized here (CleanRL's per-minibatch norm_adv: the loss must not
    normalize again). Gradients are clipped to ``max_grad_norm``; with ``target_kl`` the epochs stop
    once the last minibatch's approx KL exceeds it; with ``kl_adaptive_lr`` the learning rate follows the
    epoch's mean approx KL (``adapt_lr``). Either reads the KL back once per epoch, only then.
    Returns the mean over minibatches of the LOSS_NAMES fields: [6], not read back.

    Data parallel (``world`` of several ranks): ``batch`` is this rank's share, the rows of ``num_envs``
    envs ([T, num_envs] flattened) of a rollout of ``num_envs x world_size`` envs. Every rank draws the
    permutation of all rows, and a global minibatch is the rows it picks, wherever they live: each rank
    computes the loss of its own rows, weighted by their share of the minibatch, and the gradients are
    summed over the ranks (``comm`` times that); advantage statistics, the KL check and the returned
    means are reduced likewise. The result is the update one process makes on the whole rollout.
    """
    params = list(params)
    n = next(iter(batch.values())).shape[0]
    n_global = n * world.world_size
    size = n_global // num_minibatches
    if size < 1:
        raise ValueError(f"batch of {n_global} rows cannot make {num_minibatches} minibatches")
    device = next(iter(batch.values())).device
    stats = []
    for _ in range(update_epochs):
        perm = torch.randperm(n_global, device=device)
        minibatches = list(_minibatches(perm, size, world, num_envs))
        adv_stats = [None] * len(minibatches)  # one process: each minibatch's own statistics
        if norm_adv and world.distributed:  # over all ranks' rows of each minibatch: one collective per epoch
            adv_stats = _advantage_stats([batch["advantages"][rows] for rows, _ in minibatches], size, world, comm)
        for (rows, share), mean_std in zip(minibatches, adv_stats):
            mb = {key: v[rows] for key, v in batch.items()}
            if norm_adv:
                mb["advantages"] = normalize_advantages(mb["advantages"], mean_std=mean_std)
            optimizer.zero_grad(set_to_none=True)
            if share > 0:
                out = loss_fn(mb)
                (out.loss if share == 1 else out.loss * share).backward()
                mb_stats = torch.stack([t.detach() for t in out[1:]]) * share
            else:  # none of this minibatch's rows are on this rank: it only adds zeros
                mb_stats = torch.zeros(len(LOSS_NAMES), device=device)
            if world.distributed:
                with comm():
                    all_reduce_gradients(params, world)
            nn.utils.clip_grad_norm_(params, max_grad_norm)
            optimizer.step()
            stats.append(mb_stats)
        if kl_adaptive_lr is not None:
            epoch_kl = torch.stack(stats[-len(minibatches) :])[:, LOSS_NAMES.index("approx_kl")].mean()
            with comm():
                epoch_kl = all_reduce_sum(epoch_kl, world)
            adapt_lr(optimizer, epoch_kl.item(), kl_adaptive_lr, lr_max)
        if target_kl is not None:
            kl = stats[-1][LOSS_NAMES.index("approx_kl")].clone()
            with comm():
                kl = all_reduce_sum(kl, world)
            if kl.item() > target_kl:
                break
    means = torch.stack(stats).mean(0)
    with comm():
        return all_reduce_sum(means, world)


def adapt_lr(optimizer: torch.optim.Optimizer, kl: float, target: float, lr_max: float, lr_min: float = 1e-6) -> None:
    """The adaptive schedule of rl_games and Sample Factory: the learning rate / 1.5 when ``kl`` > 2 x ``target``,
    x 1.5 when ``kl`` < ``target`` / 2, kept within [``lr_min``, ``lr_max``]."""
    for group in optimizer.param_groups:
        if kl > 2.0 * target:
            group["lr"] = max(group["lr"] / 1.5, lr_min)
        elif kl < 0.5 * target:
            group["lr"] = min(group["lr"] * 1.5, lr_max)


def _minibatches(
    perm: torch.Tensor, size: int, world: World, num_envs: Optional[int]
) -> Iterator[tuple[torch.Tensor, float]]:
    """(this rank's rows of each global minibatch of ``perm``, their share of its ``size`` rows)."""
    if not world.distributed:
        for start in range(0, perm.numel() - size + 1, size):
            yield perm[start : start + size], 1.0
        return
    if num_envs is None:
        raise ValueError("a data-parallel update needs num_envs, this rank's number of envs")
    envs = num_envs * world.world_size
    step, env = perm // envs, perm % envs - world.rank * num_envs
    mine = (env >= 0) & (env < num_envs)
    which = torch.arange(perm.numel(), device=perm.device) // size
    rows, which = (step * num_envs + env)[mine], which[mine]
    counts = torch.bincount(which, minlength=perm.numel() // size)[: perm.numel() // size].tolist()
    for chunk, count in zip(rows.split(counts), counts):
        yield chunk, count / size


def _advantage_stats(
    advs: Sequence[torch.Tensor], size: int, world: World, comm: Callable[[], ContextManager]
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(mean, std) of each minibatch's advantages (``size`` rows over all ranks; this rank's in ``advs``), as
    ``normalize_advantages`` computes them on the whole minibatch."""
    sums = torch.stack([torch.stack([a.double().sum(), a.double().square().sum()]) for a in advs])
    with comm():
        sums = all_reduce_sum(sums, world)
    mean = sums[:, 0] / size
    std = ((sums[:, 1] - size * mean * mean) / max(size - 1, 1)).clamp(min=0).sqrt()
    return [(m.float(), s.float()) for m, s in zip(mean, std)]


def minibatch_loss(agent: nn.Module, args: PPOArgs, mb: dict[str, torch.Tensor]) -> PPOLoss:
    """The PPO loss of one minibatch (rows [M, ...] of ``Rollout.batch``) for an agent with CleanRL's
    ``get_action_and_value(obs, actions) -> (actions, logprob, entropy, value)``."""
    _, newlogprob, entropy, newvalue = agent.get_action_and_value(mb["obs"], mb["actions"])
    return ppo_loss(
        newlogprob, mb["logprobs"], mb["advantages"], newvalue, mb["values"], mb["returns"], entropy,
        clip_coef=args.clip_coef, ent_coef=args.ent_coef, vf_coef=args.vf_coef,
        clip_vloss=args.clip_vloss, kl_coef=args.kl_coef,
        norm_adv=False,  # ppo_update normalizes the minibatch (args.norm_adv)
    )  # fmt: skip


def anneal_lr(optimizer: torch.optim.Optimizer, args: PPOArgs, iteration: int) -> None:
    """With ``args.anneal_lr``, sets the learning rate of 1-based ``iteration`` on CleanRL's linear schedule to 0."""
    if args.anneal_lr:
        frac = 1.0 - (iteration - 1.0) / args.num_iterations
        optimizer.param_groups[0]["lr"] = frac * args.learning_rate


def learn(
    agent: nn.Module,
    optimizer: torch.optim.Optimizer,
    loss_fn: Callable[[nn.Module, PPOArgs, dict[str, torch.Tensor]], PPOLoss],
    rollout: Rollout,
    next_obs: torch.Tensor,
    next_done: torch.Tensor,
    args: PPOArgs,
    world: World = World(),
    comm: Callable[[], ContextManager] = nullcontext,
    next_terminated: Optional[torch.Tensor] = None,
) -> dict[str, float]:
    """One iteration's update: GAE(``gamma``, ``gae_lambda``) advantages over ``rollout``, bootstrapped from
    ``agent.get_value(next_obs)`` [B] and ``next_done`` [B], then ``ppo_update`` with ``loss_fn(agent, args,
    minibatch)`` (``minibatch_loss``, maybe compiled). Returns the ``losses/*`` scalars and
    ``charts/learning_rate``, read back once. Data parallel: ``rollout`` holds this rank's envs, and
    ``world`` and ``comm`` go to ``ppo_update`` (``Run.world``, ``Run.comm``). With ``args.bootstrap_truncated``,
    ``rollout.terminations`` and ``next_terminated`` [B] tell terminations from truncations (``gae``)."""
    if args.bootstrap_truncated and next_terminated is None:
        raise ValueError("learn: --bootstrap-truncated needs next_terminated (and rollout.terminations stored)")
    bootstrap = (rollout.terminations, next_terminated) if args.bootstrap_truncated else ()
    with torch.no_grad():
        next_value = agent.get_value(next_obs)
        advantages, returns = gae(
            rollout.rewards, rollout.values, rollout.dones, next_value, next_done, args.gamma, args.gae_lambda,
            *bootstrap,
        )  # fmt: skip
    batch = rollout.batch(advantages, returns)
    stats = ppo_update(
        lambda mb: loss_fn(agent, args, mb), optimizer, agent.parameters(), batch,
        update_epochs=args.update_epochs, num_minibatches=args.num_minibatches,
        max_grad_norm=args.max_grad_norm, target_kl=args.target_kl, kl_adaptive_lr=args.kl_adaptive_lr,
        lr_max=args.lr_max, norm_adv=args.norm_adv,
        world=world, num_envs=rollout.rewards.shape[1], comm=comm,
    ).tolist()  # fmt: skip
    with comm():
        explained_var = _explained_variance(batch["values"], batch["returns"], world).item()
    losses = {f"losses/{k}": v for k, v in zip(LOSS_NAMES, stats)}
    return {
        "charts/learning_rate": optimizer.param_groups[0]["lr"],
        **losses,
        "losses/explained_variance": explained_var,
    }


def _explained_variance(y_pred: torch.Tensor, y_true: torch.Tensor, world: World) -> torch.Tensor:
    """``explained_variance`` over every rank's rows."""
    if not world.distributed:
        return explained_variance(y_pred, y_true)
    y, d = y_true.double(), (y_true - y_pred).double()
    s = all_reduce_sum(torch.stack([torch.tensor(float(y.numel()), dtype=torch.float64, device=y.device),
                                    y.sum(), (y * y).sum(), d.sum(), (d * d).sum()]), world)  # fmt: skip
    n = s[0]
    var_y = (s[2] - s[1] * s[1] / n) / (n - 1)
    var_d = (s[4] - s[3] * s[3] / n) / (n - 1)
    return torch.where(var_y == 0, torch.full_like(var_y, float("nan")), 1 - var_d / var_y)
