"""APPO (asynchronous PPO with V-trace, as in Sample Factory): the algorithm's pieces for ``scripts/appo.py``,
which holds the update loop; the sampling side (trajectories, the sampler thread, the weights it acts
with, episode statistics) is ``rlfast/algos/appo_sampler.py`` (Sample Factory's learning / sampling split).

APPOArgs        the hyperparameters (scripts/appo.py composes them with RunArgs)
appo_loss       V-trace targets and PPO's clipped loss on a minibatch of trajectories
policy_on       the policy's log-probabilities, entropies and values along trajectories (recurrent: unrolled)
taken_logprobs  the log-probabilities of the actions trajectories took, under the weights now
update_kl       PPO's approx KL from the weights a batch began with (--kl-reference batch)
"""

from dataclasses import dataclass
from typing import ClassVar, Literal, Mapping, Optional

import torch
from torch import nn

from rlfast.algos.flags import Flags, bounded
from rlfast.algos.obs import each
from rlfast.algos.ppo import PPOLoss, ppo_loss, weighted_mean
from rlfast.algos.vtrace import vtrace


@dataclass
class APPOArgs(Flags):
    """APPO's hyperparameters; ``scripts/appo.py``'s ``Args`` composes this with ``RunArgs``."""

    RENAMED: ClassVar[dict[str, str]] = {"rollout": "trajectory_length"}

    num_envs: int = 64
    env_batch_size: Optional[int] = None
    """envs per `recv` of the async pool: the pool's batch_size, EnvPool's name (None: num_envs // 2,
    double-buffered sampling; num_envs: sync)"""
    trajectory_length: int = bounded(32, low=1)
    """steps per trajectory (T; Sample Factory's name for it; --rollout, its old name, is still accepted)"""
    batch_size: int = bounded(2048, low=1)
    """samples (env steps) per learner batch, a whole number of trajectories: Sample Factory's --batch-size
    (the pool's batch_size is --env-batch-size)"""
    num_minibatches: int = bounded(2, low=1)
    """SGD steps per batch (minibatches of whole trajectories)"""
    update_epochs: int = bounded(1, low=1)
    """passes over each batch"""
    learning_rate: float = bounded(2.5e-4, low=0, low_open=True)
    """the learning rate of the optimizer (where --kl-adaptive-lr starts)"""
    kl_adaptive_lr: Optional[float] = bounded(None, low=0, low_open=True)
    """a KL target that steers the learning rate (Sample Factory's and rl_games' adaptive schedule, PPO's
    --kl-adaptive-lr): after each epoch over a batch, lr / 1.5 when its approx KL (from --kl-reference) is
    above twice this, x 1.5 when below half, within [1e-6, --lr-max] (None: a constant rate)"""
    lr_max: float = bounded(1e-2, low=0, low_open=True)
    """the largest learning rate --kl-adaptive-lr may reach"""
    kl_reference: Literal["acting", "batch"] = "acting"
    """the policy --kl-adaptive-lr measures the KL from: the acting one (the loss's approx KL, policy lag
    included: with a lagging sampler it holds the rate low) or the learner's at the start of the batch (PPO's
    measure: what this batch's epochs moved; one minibatch probed, one extra forward pass of it per epoch)"""
    gamma: float = bounded(0.99, low=0, high=1)
    """the discount factor gamma"""
    vtrace_lambda: float = bounded(1.0, low=0, high=1)
    """V-trace's lambda (1: IMPALA's and Sample Factory's)"""
    rho_bar: float = bounded(1.0, low=0, low_open=True)
    """truncation of the importance weights in V-trace's value targets"""
    c_bar: float = bounded(1.0, low=0, low_open=True)
    """truncation of the importance weights of V-trace's traces"""
    pg_rho_bar: float = bounded(1.0, low=0, low_open=True)
    """truncation of the importance weights of the policy-gradient advantages"""
    clip_coef: float = bounded(0.1, low=0, low_open=True)
    """the PPO ratio clipping (Sample Factory: 0.1)"""
    norm_adv: bool = True
    """normalize advantages per minibatch"""
    ent_coef: float = 0.01
    """coefficient of the entropy bonus"""
    vf_coef: float = 0.5
    """coefficient of the value loss"""
    max_grad_norm: float = bounded(0.5, low=0, low_open=True)
    """the maximum norm for gradient clipping"""
    queue_size: int = bounded(2, low=1)
    """complete batches that may wait for the learner; the sampler waits beyond that"""
    deterministic: bool = False
    """Cleanba's reproducible arrangement: a sync pool, and sampler and learner alternating through queues of one,
    so the learner always trains on data of the second-latest weights (same seed, same losses)"""

    @property
    def trajectories_per_batch(self) -> int:
        return self.batch_size // max(self.trajectory_length, 1)

    @property
    def num_iterations(self) -> int:
        return self.total_timesteps // max(self.batch_size, 1)

    @property
    def recv_batch(self) -> int:
        """The pool's batch_size: envs per recv."""
        if self.deterministic:
            return self.num_envs
        return self.env_batch_size or max(self.num_envs // 2, 1)

    def validate(self) -> list[str]:
        problems = super().validate()
        if problems:
            return problems
        if self.env_batch_size is not None and not 1 <= self.env_batch_size <= self.num_envs:
            problems.append(f"--env-batch-size must be in [1, --num-envs {self.num_envs}], got {self.env_batch_size}")
        T = self.trajectory_length
        if self.batch_size % T:
            problems.append(f"--batch-size {self.batch_size} is not a whole number of --trajectory-length {T} "
                            "trajectories")  # fmt: skip
        elif self.trajectories_per_batch % self.num_minibatches:
            problems.append(f"the {self.trajectories_per_batch} trajectories of a batch do not split into "
                            f"--num-minibatches {self.num_minibatches}")  # fmt: skip
        if self.kl_adaptive_lr is not None and self.lr_max < self.learning_rate:
            problems.append(f"--lr-max {self.lr_max} is below --learning-rate {self.learning_rate}")
        if self.deterministic and self.batch_size != self.num_envs * T:
            problems.append(f"--deterministic trains on whole rollouts of every env: --batch-size must be "
                            f"--num-envs x --trajectory-length = {self.num_envs * T}, got {self.batch_size}")
        return problems


def policy_on(agent: nn.Module, batch: Mapping[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``agent``'s (log-probability of the action taken, entropy, value), each [k, T + 1], at the T + 1 observations
    of trajectories ``batch`` (row T: its value; its action a dummy). A recurrent policy (``batch`` has ``state``)
    is unrolled time-major from each trajectory's state, zeroed where an observation starts an episode (the
    closing one after a reset step)."""
    k, T = batch["actions"].shape[:2]
    actions = torch.cat((batch["actions"], batch["actions"][:, :1]), 1)  # a dummy for row T
    if "state" not in batch:
        obs = each(lambda o: o.flatten(0, 1), batch["obs"])  # a Dict env's: each key's tensor
        _, logprob, entropy, value = agent.get_action_and_value(obs, actions.flatten(0, 1))
        return logprob.view(k, T + 1), entropy.view(k, T + 1), value.view(k, T + 1)
    starts = torch.cat((batch["starts"], batch["reset"][:, -1:]), 1)
    obs = each(lambda o: o.transpose(0, 1).flatten(0, 1), batch["obs"])
    out = agent.get_action_and_value(obs, batch["state"], starts.T.flatten(), actions.transpose(0, 1).flatten(0, 1))
    logprob, entropy, value = (x.view(T + 1, k).T for x in out[1:4])
    return logprob, entropy, value


def taken_logprobs(agent: nn.Module, batch: Mapping[str, torch.Tensor]) -> torch.Tensor:
    """The log-probabilities [k * T] of the actions trajectories ``batch`` took, under ``agent``'s weights now."""
    T = batch["actions"].shape[1]
    with torch.no_grad():
        return policy_on(agent, batch)[0][:, :T].flatten()


def update_kl(agent: nn.Module, probe: Mapping[str, torch.Tensor], reference: torch.Tensor) -> torch.Tensor:
    """PPO's approx KL, ``(ratio - 1) - log ratio`` over the ``probe`` trajectories' steps (reset steps left out),
    from the policy that gave ``reference`` (``taken_logprobs`` then) to ``agent``'s now: a scalar tensor."""
    logratio = taken_logprobs(agent, probe) - reference
    return weighted_mean((logratio.exp() - 1) - logratio, (~probe["reset"]).float().flatten())


def appo_loss(agent: nn.Module, args: APPOArgs, batch: Mapping[str, torch.Tensor]) -> PPOLoss:
    """V-trace targets under the current weights and PPO's clipped loss on trajectories ``batch`` ([k, T] rows
    of ``Trajectories``), reset steps left out. The ratio is the current policy's to the acting one's."""
    T = batch["actions"].shape[1]
    logprob, entropy, value = policy_on(agent, batch)
    logprob, entropy = logprob[:, :T], entropy[:, :T]
    log_rhos = logprob.detach() - batch["logprobs"]
    targets = vtrace(log_rhos.T, batch["rewards"].T, value[:, :T].detach().T, value[:, T].detach(),
                     batch["terminated"].T, batch["truncated"].T, args.gamma, args.vtrace_lambda, args.rho_bar,
                     args.c_bar, args.pg_rho_bar)  # fmt: skip
    weights = (~batch["reset"]).float().flatten()
    out = ppo_loss(
        logprob.flatten(), batch["logprobs"].flatten(), targets.pg_advantages.T.flatten(), value[:, :T].flatten(),
        value[:, :T].detach().flatten(), targets.vs.T.flatten(), entropy.flatten(), clip_coef=args.clip_coef,
        ent_coef=args.ent_coef, vf_coef=args.vf_coef, clip_vloss=False, norm_adv=args.norm_adv, weights=weights,
    )  # fmt: skip
    return out
