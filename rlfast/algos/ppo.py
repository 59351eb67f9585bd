"""The PPO objective (Schulman et al. 2017) as in CleanRL: clipped surrogate, optionally
clipped value loss, entropy bonus, and the diagnostics (approx KL, clip fraction)."""

from typing import Callable, Iterable, Mapping, NamedTuple, Optional

import torch
from torch import nn


class PPOLoss(NamedTuple):
    """Scalar tensors (no ``.item()``: read them once per iteration, off the hot path)."""

    loss: torch.Tensor
    """policy_loss - ent_coef * entropy + vf_coef * value_loss: what to backpropagate."""
    policy_loss: torch.Tensor
    value_loss: torch.Tensor
    entropy: torch.Tensor
    old_approx_kl: torch.Tensor
    """mean(-log ratio): the naive KL estimator."""
    approx_kl: torch.Tensor
    """mean((ratio - 1) - log ratio): the low-variance, always >= 0 estimator (Schulman's k3)."""
    clipfrac: torch.Tensor
    """Fraction of samples with |ratio - 1| > clip_coef."""


def normalize_advantages(advantages: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """``(a - mean) / (std + eps)`` over all of ``advantages`` (CleanRL's per-minibatch norm_adv)."""
    return (advantages - advantages.mean()) / (advantages.std() + eps)


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
    """
    logratio = newlogprob - oldlogprob
    ratio = logratio.exp()
    with torch.no_grad():
        old_approx_kl = (-logratio).mean()
        approx_kl = ((ratio - 1) - logratio).mean()
        clipfrac = ((ratio - 1.0).abs() > clip_coef).float().mean()

    if norm_adv:
        advantages = normalize_advantages(advantages)
    pg_loss1 = -advantages * ratio
    pg_loss2 = -advantages * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)
    policy_loss = torch.max(pg_loss1, pg_loss2).mean()

    if clip_vloss:
        c = clip_coef if vf_clip_coef is None else vf_clip_coef
        v_loss_unclipped = (newvalue - returns) ** 2
        v_clipped = oldvalue + torch.clamp(newvalue - oldvalue, -c, c)
        v_loss_clipped = (v_clipped - returns) ** 2
        value_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
    else:
        value_loss = 0.5 * ((newvalue - returns) ** 2).mean()

    entropy_mean = entropy.mean()
    loss = policy_loss - ent_coef * entropy_mean + vf_coef * value_loss
    return PPOLoss(loss, policy_loss, value_loss, entropy_mean, old_approx_kl, approx_kl, clipfrac)


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
) -> torch.Tensor:
    """CleanRL's update: ``update_epochs`` shuffled passes of ``num_minibatches`` Adam steps.

    ``batch`` holds the flattened rollout, every tensor [N, ...] on one device; ``loss_fn``
    gets the minibatch as the same dict of [N / num_minibatches, ...] rows. Gradients are
    clipped to ``max_grad_norm``; with ``target_kl`` the epochs stop once the last
    minibatch's approx KL exceeds it (one host read per epoch, only then).
    Returns the mean over minibatches of the LOSS_NAMES fields: [6], not read back.
    """
    params = list(params)
    n = next(iter(batch.values())).shape[0]
    size = n // num_minibatches
    if size < 1:
        raise ValueError(f"batch of {n} rows cannot make {num_minibatches} minibatches")
    device = next(iter(batch.values())).device
    stats = []
    for _ in range(update_epochs):
        perm = torch.randperm(n, device=device)
        for start in range(0, n - size + 1, size):
            mb = perm[start : start + size]
            out = loss_fn({k: v[mb] for k, v in batch.items()})
            optimizer.zero_grad(set_to_none=True)
            out.loss.backward()
            nn.utils.clip_grad_norm_(params, max_grad_norm)
            optimizer.step()
            stats.append(torch.stack([t.detach() for t in out[1:]]))
        if target_kl is not None and out.approx_kl.item() > target_kl:
            break
    return torch.stack(stats).mean(0)
