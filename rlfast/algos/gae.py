"""Generalized advantage estimation (Schulman et al. 2016) with CleanRL's done convention.

Convention (CleanRL ``ppo.py`` / ``ppo_atari_envpool.py``): ``dones[t]`` is 1 when the
observation stored at step ``t`` follows an episode end, i.e. ``dones[t]`` is the
``terminated | truncated`` returned by the step that produced ``obs[t]``. The transition
``t`` is then bootstrapped with ``1 - dones[t + 1]`` (``1 - next_done`` at the last step).

With rlfast's next-step autoreset the step after an episode end is a *reset step*: ``obs[t]``
with ``dones[t] == 1`` is the final observation, the action taken there is ignored, the
reward is 0 and the next observation is the first one of a new episode. Under this
convention:

- the last transition of an episode (``t - 1``) is not bootstrapped (``1 - dones[t] == 0``):
  its delta is ``r[t - 1] - V(obs[t - 1])``, exactly right for termination (truncation is
  treated as termination, as in CleanRL);
- the reset step itself gets ``delta = 0 + gamma * V(s_reset) - V(s_final)`` followed by
  the new episode's advantages: a sample whose action had no effect and whose value target
  mixes two episodes. CleanRL + EnvPool train on it unchanged and so do we: it is one sample
  per finished episode (0.2% of a CartPole batch at return 500), and dropping it would need
  ``1 - dones`` weights in every loss term.

Bootstrapping truncations (``terminations`` given: rl_games' ``value_bootstrap``, Sample Factory's
``value_bootstrap``): the last transition of an episode that was truncated, not terminated, is
bootstrapped from ``V`` of its final observation, which next-step autoreset keeps in the rollout as
the reset step's ``obs[t]`` (so ``values[t]`` is that value); the advantage chain still stops at
every episode end.
"""

from typing import Optional

import torch


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    next_value: torch.Tensor,
    next_done: torch.Tensor,
    gamma: float,
    lam: float,
    terminations: Optional[torch.Tensor] = None,
    next_terminated: Optional[torch.Tensor] = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages and returns of a rollout of ``T`` steps of ``B`` envs.

    Args:
        rewards: [T, B] reward of the transition from ``obs[t]``.
        values: [T, B] critic value ``V(obs[t])``.
        dones: [T, B] 1.0 where ``obs[t]`` follows an episode end (see module docstring).
        next_value: [B] ``V`` of the observation after the last step.
        next_done: [B] done flag of that observation.
        gamma: discount factor.
        lam: GAE lambda.
        terminations: [T, B] 1.0 where ``obs[t]`` follows a termination (a subset of ``dones``); with
            ``next_terminated`` [B], truncations are bootstrapped (module docstring). None: every episode
            end is a termination (CleanRL).

    Returns:
        ``(advantages, returns)``, both [T, B] with ``returns = advantages + values``.
    """
    if (terminations is None) != (next_terminated is None):
        raise ValueError("gae: pass terminations and next_terminated together")
    if terminations is None:
        terminations, next_terminated = dones, next_done
    num_steps = rewards.shape[0]
    advantages = torch.empty_like(rewards)
    lastgaelam = torch.zeros_like(next_value)
    nextnonterminal = 1.0 - next_done.to(rewards.dtype)  # the advantage chain goes on into obs[t + 1]
    nextnotterminated = 1.0 - next_terminated.to(rewards.dtype)  # V(obs[t + 1]) is bootstrapped
    nextvalues = next_value
    for t in reversed(range(num_steps)):
        delta = rewards[t] + gamma * nextvalues * nextnotterminated - values[t]
        lastgaelam = delta + gamma * lam * nextnonterminal * lastgaelam
        advantages[t] = lastgaelam
        nextnonterminal = 1.0 - dones[t].to(rewards.dtype)
        nextnotterminated = 1.0 - terminations[t].to(rewards.dtype)
        nextvalues = values[t]
    return advantages, advantages + values
