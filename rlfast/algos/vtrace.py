"""V-trace (Espeholt et al. 2018, IMPALA): off-policy value targets and policy-gradient advantages.

Trajectories are [T, B] (time, env) on any device, in the step-outcome convention of rlfast's
pool: row ``t`` holds the observation ``x_t`` an action was taken from, the log-probability ratio
``log(pi(a_t|x_t) / mu(a_t|x_t))`` of the learner's policy pi to the behaviour policy mu that
acted, and what that step returned (``r_t``, ``terminated_t``, ``truncated_t``); ``values[t]`` is
``V(x_t)`` and ``bootstrap_value`` is ``V(x_T)``, the observation after the last row. With
``rho_t = min(rho_bar, ratio_t)``, ``c_t = lam * min(c_bar, ratio_t)`` and the discount
``g_t = gamma * (1 - terminated_t)``::

    delta_t      = rho_t * (r_t + g_t * V(x_{t+1}) - V(x_t))
    v_t - V(x_t) = delta_t + g_t * c_t * (1 - end_t) * (v_{t+1} - V(x_{t+1}))      (v_T = V(x_T))
    pg_adv_t     = min(pg_rho_bar, ratio_t) * (r_t + g_t * w_{t+1} - V(x_t))
                   where w_{t+1} = V(x_{t+1}) after an episode end, else v_{t+1}

``end_t = terminated_t | truncated_t``. A termination does not bootstrap (``g_t = 0``); a truncation
bootstraps from ``V(x_{t+1})``, which under next-step autoreset is the value of the episode's final
observation (row ``t + 1``), and the recursion stops there. Row ``t + 1`` is then the pool's reset
step (its action ignored, reward 0): no transition, and a trainer leaves it out of its losses.
On-policy (ratios 1, ``rho_bar``, ``c_bar`` >= 1) ``v_t`` is the TD(lambda) return
and ``v_t - V(x_t)`` the GAE(lambda) advantage.

Targets are computed without gradient (inputs are detached): one backward loop over T of [B]
tensor operations, nothing per env.
"""

from typing import NamedTuple

import torch


class VTrace(NamedTuple):
    vs: torch.Tensor
    """[T, B] value targets v_t"""
    pg_advantages: torch.Tensor
    """[T, B] policy-gradient advantages"""


@torch.no_grad()
def vtrace(
    log_rhos: torch.Tensor,
    rewards: torch.Tensor,
    values: torch.Tensor,
    bootstrap_value: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    gamma: float,
    lam: float = 1.0,
    rho_bar: float = 1.0,
    c_bar: float = 1.0,
    pg_rho_bar: float = 1.0,
) -> VTrace:
    """V-trace targets of a [T, B] trajectory batch (see the module docstring for the convention).

    Args:
        log_rhos: [T, B] ``log pi(a_t|x_t) - log mu(a_t|x_t)``.
        rewards: [T, B] ``r_t``.
        values: [T, B] ``V(x_t)`` under the learner's value function.
        bootstrap_value: [B] ``V(x_T)``.
        terminated, truncated: [T, B] bool (or 0/1) end flags of each step.
        gamma: discount; lam: the trace's lambda; rho_bar, c_bar: the truncation levels of the
            importance weights of the value target and the trace; pg_rho_bar: of the policy gradient.
    """
    T = rewards.shape[0]
    if log_rhos.shape != rewards.shape or values.shape != rewards.shape or bootstrap_value.shape != rewards.shape[1:]:
        raise ValueError(
            f"vtrace needs [T, B] log_rhos, rewards, values and [B] bootstrap_value; got {tuple(log_rhos.shape)}, "
            f"{tuple(rewards.shape)}, {tuple(values.shape)}, {tuple(bootstrap_value.shape)}"
        )
    dtype = values.dtype
    ratios = log_rhos.detach().to(dtype).exp()
    rhos = ratios.clamp(max=rho_bar)
    cs = lam * ratios.clamp(max=c_bar)
    values, bootstrap_value = values.detach(), bootstrap_value.detach().to(dtype)
    terminated, truncated = terminated.to(torch.bool), truncated.to(torch.bool)
    discounts = gamma * (~terminated).to(dtype)
    go_on = (~(terminated | truncated)).to(dtype)  # the trace continues into the next row
    next_values = torch.cat((values[1:], bootstrap_value[None]), 0)
    deltas = rhos * (rewards.to(dtype) + discounts * next_values - values)
    vs_minus_v = torch.empty_like(values)
    acc = torch.zeros_like(bootstrap_value)  # v_{t+1} - V(x_{t+1})
    for t in reversed(range(T)):
        acc = deltas[t] + discounts[t] * cs[t] * go_on[t] * acc
        vs_minus_v[t] = acc
    vs = values + vs_minus_v
    next_vs = torch.cat((vs[1:], bootstrap_value[None]), 0)
    next_targets = torch.where(go_on.bool(), next_vs, next_values)
    pg_advantages = ratios.clamp(max=pg_rho_bar) * (rewards.to(dtype) + discounts * next_targets - values)
    return VTrace(vs, pg_advantages)
