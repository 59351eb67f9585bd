"""PPO (Schulman et al. 2017) as in CleanRL: the pure pieces the PPO trainers in ``scripts/`` share.
Each script holds its own update loop (``update``: GAE, epochs, minibatches, loss, optimizer step).

PPOArgs              CleanRL's PPO hyperparameters (a script composes them with RunArgs, overriding defaults)
Rollout              T x B rollout storage on the training device (episode statistics on the host)
take_rows            a minibatch's rows of a rollout's field, channels-last frames selected as they are stored
ppo_loss             clipped surrogate, optionally clipped value loss, entropy bonus, diagnostics (PPOLoss)
anneal_lr, adapt_lr  CleanRL's linear learning-rate schedule; rl_games' KL-adaptive one
entropy_coef         the entropy bonus's weight at a step (constant, or annealed by --ent-coef-final)
explained_variance   of the value predictions, over every rank's rows
"""

from dataclasses import dataclass
from typing import Any, NamedTuple, Optional, Sequence, Union

import torch

from rlfast.algos.distributed import World
from rlfast.algos.flags import Flags, bounded


@dataclass
class PPOArgs(Flags):
    """CleanRL's ``ppo.py`` hyperparameters (its defaults); a PPO script's ``Args`` composes this with
    ``RunArgs``."""

    learning_rate: float = bounded(2.5e-4, low=0, low_open=True)
    """the learning rate of the optimizer"""
    num_steps: int = bounded(128, low=1)
    """steps per env per rollout"""
    anneal_lr: bool = True
    """anneal the learning rate linearly to 0"""
    gamma: float = bounded(0.99, low=0, high=1)
    """the discount factor gamma"""
    gae_lambda: float = bounded(0.95, low=0, high=1)
    """the lambda for generalized advantage estimation"""
    num_minibatches: int = bounded(4, low=1)
    """the number of minibatches per epoch"""
    update_epochs: int = bounded(4, low=1)
    """the number of epochs over each rollout"""
    norm_adv: bool = True
    """normalize advantages per minibatch"""
    clip_coef: float = bounded(0.2, low=0, low_open=True)
    """the surrogate clipping coefficient"""
    clip_vloss: bool = True
    """clip the value loss as in the PPO paper's code"""
    ent_coef: float = bounded(0.01, low=0)
    """coefficient of the entropy bonus (where --ent-coef-final anneals it: its first value)"""
    ent_coef_final: Optional[float] = bounded(None, low=0, note="or left out")
    """anneal the entropy coefficient linearly from --ent-coef to this over --ent-anneal-steps env steps, then hold
    it (rl_games' schedule_entropy; None: constant, CleanRL)"""
    ent_anneal_steps: Optional[int] = bounded(None, low=1, note="or left out")
    """the env steps --ent-coef-final's schedule takes (None: the whole run, --total-timesteps)"""
    vf_coef: float = bounded(0.5, low=0)
    """coefficient of the value loss"""
    max_grad_norm: float = bounded(0.5, low=0, low_open=True)
    """the maximum norm for gradient clipping"""
    target_kl: Optional[float] = bounded(None, low=0, low_open=True)
    """stop an update's epochs early once the approx KL exceeds this"""
    kl_adaptive_lr: Optional[float] = bounded(None, low=0, low_open=True)
    """a KL target that steers the learning rate (rl_games' and Sample Factory's adaptive schedule): after each
    epoch, lr / 1.5 when the epoch's mean approx KL is above twice this, lr x 1.5 when below half of it, within
    [1e-6, --lr-max]; --learning-rate is where it starts. Needs --no-anneal-lr (None: off, CleanRL)"""
    lr_max: float = bounded(1e-2, low=0, low_open=True)
    """the largest learning rate --kl-adaptive-lr may reach"""
    kl_coef: float = bounded(0.0, low=0)
    """weight of a KL penalty in the loss: the mean of (ratio - 1) - log(ratio), an estimate of KL(rollout policy ||
    current policy) (Sample Factory's kl_loss_coeff for MuJoCo; 0: none, CleanRL)"""
    bootstrap_truncated: bool = False
    """bootstrap the value at time-limit truncations from the final observation (rl_games' value_bootstrap);
    off: every episode end is a termination (CleanRL)"""

    @property
    def batch_size(self) -> int:
        """Steps per rollout, num_envs x num_steps: CleanRL's batch_size (not a flag; not the pool's batch_size,
        envs per recv)."""
        return self.num_envs * self.num_steps

    @property
    def num_iterations(self) -> int:
        return self.total_timesteps // max(self.batch_size, 1)  # validate() reports a zero batch

    def validate(self) -> list[str]:
        problems = super().validate()
        if not problems and self.batch_size % self.num_minibatches:
            problems.append(f"the batch of {self.batch_size} steps (num_envs x num_steps) is not divisible by "
                            f"--num-minibatches {self.num_minibatches}")  # fmt: skip
        if self.ent_anneal_steps is not None and self.ent_coef_final is None:
            problems.append(f"--ent-anneal-steps {self.ent_anneal_steps} schedules nothing without --ent-coef-final")
        if self.kl_adaptive_lr is not None and self.anneal_lr:
            problems.append("--kl-adaptive-lr sets the learning rate itself: add --no-anneal-lr")
        if self.kl_adaptive_lr is not None and self.lr_max < self.learning_rate:
            problems.append(f"--lr-max {self.lr_max} is below --learning-rate {self.learning_rate}")
        return problems


class Rollout:
    """Storage for one rollout of ``T`` steps of ``B`` envs.

    On ``device``: ``obs`` [T, B, *obs_shape], ``actions`` [T, B, *action_shape], and ``logprobs``,
    ``rewards``, ``dones``, ``terminations`` (the part of ``dones`` that is not a time limit; stored only by
    trainers that bootstrap truncations), ``values`` [T, B] float32. (Finished episodes: rlfast/algos/episodes.py.)
    ``obs_memory_format=torch.channels_last`` keeps frames [C, H, W] in memory as [H, W, C] (the layout the
    speed option ``channels_last`` computes in): ``store`` then copies a channels-last batch as it is, and
    ``take_rows`` selects a minibatch without reordering its bytes.
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
        obs_memory_format: torch.memory_format = torch.contiguous_format,
    ) -> None:
        T, B = num_steps, num_envs
        if obs_memory_format == torch.channels_last:  # frames [C, H, W] kept as [H, W, C]: see take_rows
            if len(obs_shape) != 3:
                raise ValueError(f"obs_memory_format=torch.channels_last is for frames [C, H, W], got obs_shape "
                                 f"{tuple(obs_shape)}")  # fmt: skip
            c, h, w = obs_shape
            self.obs = torch.zeros((T, B, h, w, c), dtype=obs_dtype, device=device).permute(0, 1, 4, 2, 3)
        else:
            self.obs = torch.zeros((T, B, *obs_shape), dtype=obs_dtype, device=device)
        self.actions = torch.zeros((T, B, *action_shape), dtype=action_dtype, device=device)
        self.logprobs = torch.zeros((T, B), device=device)
        self.rewards = torch.zeros((T, B), device=device)
        self.dones = torch.zeros((T, B), device=device)
        self.terminations = torch.zeros((T, B), device=device)
        self.values = torch.zeros((T, B), device=device)

    def store(self, index: Any, **values: torch.Tensor) -> None:
        """Writes one step's values into the named fields at ``index`` (``t``, or ``(t, envs)``), e.g.
        ``store(t, actions=a, logprobs=lp)``; copies from pinned host memory do not block."""
        for name, value in values.items():
            getattr(self, name)[index].copy_(value, non_blocking=True)

    def batch(self, advantages: torch.Tensor, returns: torch.Tensor) -> dict[str, torch.Tensor]:
        """The rollout flattened to rows [T * B, ...] with its advantages and returns: what the update samples."""
        n = self.rewards.numel()
        return {
            "obs": self.obs.reshape(n, *self.obs.shape[2:]),
            "actions": self.actions.reshape(n, *self.actions.shape[2:]),
            "logprobs": self.logprobs.reshape(-1), "advantages": advantages.reshape(-1),
            "returns": returns.reshape(-1), "values": self.values.reshape(-1),
        }  # fmt: skip


def take_rows(x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``x.index_select(0, rows)`` in ``x``'s memory format. Frames [N, C, H, W] stored channels-last are selected
    as the [N, H, W, C] rows they are in memory (torch's ``index_select`` of a channels-last tensor gathers element
    by element and returns it in NCHW, which the CNN then reorders back: on a CPU those two cost several times the
    copy of the rows, for Atari's 4 channels more than a minibatch's first convolution)."""
    if x.dim() == 4 and not x.is_contiguous() and x.is_contiguous(memory_format=torch.channels_last):
        return x.permute(0, 2, 3, 1).index_select(0, rows).permute(0, 3, 1, 2)
    return x.index_select(0, rows)


def sequence_rows(envs: torch.Tensor, num_steps: int, num_envs: int) -> torch.Tensor:
    """The rows of ``Rollout.batch`` (a [T, B] rollout flattened) that hold the whole rollouts of ``envs``, time-major:
    row ``t * len(envs) + k`` is env ``envs[k]`` at step t. A recurrent policy's minibatch (CleanRL's
    ppo_atari_lstm: minibatches of envs, each unrolled over all T steps from its state at the rollout's start)."""
    return (torch.arange(num_steps, device=envs.device)[:, None] * num_envs + envs[None, :]).flatten()


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
            clamp(newvalue - oldvalue, -clip_coef, clip_coef)`` (CleanRL).
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
        v_loss_unclipped = (newvalue - returns) ** 2
        v_clipped = oldvalue + torch.clamp(newvalue - oldvalue, -clip_coef, clip_coef)
        v_loss_clipped = (v_clipped - returns) ** 2
        value_loss = 0.5 * weighted_mean(torch.max(v_loss_unclipped, v_loss_clipped), weights)
    else:
        value_loss = 0.5 * weighted_mean((newvalue - returns) ** 2, weights)

    entropy_mean = weighted_mean(entropy, weights)
    loss = policy_loss - ent_coef * entropy_mean + vf_coef * value_loss
    if kl_coef > 0:
        loss = loss + kl_coef * approx_kl
    return PPOLoss(loss, policy_loss, value_loss, entropy_mean, old_approx_kl, approx_kl.detach(), clipfrac)


def explained_variance(y_pred: torch.Tensor, y_true: torch.Tensor, world: World = World()) -> torch.Tensor:
    """``1 - Var[y_true - y_pred] / Var[y_true]`` (NaN when ``y_true`` is constant), [N] -> scalar; over every
    rank's rows under torchrun (from float64 sums)."""
    if not world.distributed:
        var_y = y_true.var()
        return torch.where(var_y == 0, torch.full_like(var_y, float("nan")), 1 - (y_true - y_pred).var() / var_y)
    y, d = y_true.double(), (y_true - y_pred).double()
    s = world.sum(torch.stack([torch.tensor(float(y.numel()), dtype=torch.float64, device=y.device),
                               y.sum(), (y * y).sum(), d.sum(), (d * d).sum()]))  # fmt: skip
    n = s[0]
    var_y = (s[2] - s[1] * s[1] / n) / (n - 1)
    var_d = (s[4] - s[3] * s[3] / n) / (n - 1)
    return torch.where(var_y == 0, torch.full_like(var_y, float("nan")), 1 - var_d / var_y)


LOSS_NAMES = ("policy_loss", "value_loss", "entropy", "old_approx_kl", "approx_kl", "clipfrac")
"""The PPOLoss fields after ``loss``: the ``losses/*`` scalars the updates log, in this order."""


def adapt_lr(optimizer: torch.optim.Optimizer, kl: float, target: float, lr_max: float, lr_min: float = 1e-6) -> None:
    """The adaptive schedule of rl_games and Sample Factory: the learning rate / 1.5 when ``kl`` > 2 x ``target``,
    x 1.5 when ``kl`` < ``target`` / 2, kept within [``lr_min``, ``lr_max``]."""
    for group in optimizer.param_groups:
        if kl > 2.0 * target:
            group["lr"] = max(group["lr"] / 1.5, lr_min)
        elif kl < 0.5 * target:
            group["lr"] = min(group["lr"] * 1.5, lr_max)


def entropy_coef(args: PPOArgs, global_step: int) -> float:
    """The entropy bonus's weight for an update after ``global_step`` env steps: ``args.ent_coef``, or with
    ``args.ent_coef_final`` the linear schedule from it to that over ``args.ent_anneal_steps`` steps (the whole run
    when None), held at the end."""
    if args.ent_coef_final is None:
        return args.ent_coef
    frac = min(global_step / (args.ent_anneal_steps or args.total_timesteps), 1.0)
    return args.ent_coef + frac * (args.ent_coef_final - args.ent_coef)


def anneal_lr(optimizer: torch.optim.Optimizer, args: PPOArgs, iteration: int) -> None:
    """With ``args.anneal_lr``, sets the learning rate of 1-based ``iteration`` on CleanRL's linear schedule to 0."""
    if args.anneal_lr:
        frac = 1.0 - (iteration - 1.0) / args.num_iterations
        optimizer.param_groups[0]["lr"] = frac * args.learning_rate

