"""V-trace (rlfast/algos/vtrace.py) against the paper's sum form computed step by step, hand-computed cases,
GAE(lambda) on on-policy data, and no gradient through the targets."""

import math

import pytest
import torch

from rlfast.algos.gae import gae
from rlfast.algos.vtrace import vtrace


def naive_vtrace(log_rhos, rewards, values, bootstrap, terminated, truncated, gamma, lam, rho_bar, c_bar, pg_rho_bar):
    """Espeholt et al.'s definition, one env and one step at a time in Python floats:
    v_s = V(x_s) + sum_{t >= s} (prod_{i=s}^{t-1} g_i c_i [no end at i]) delta_t, the sum cut at an episode end."""
    T, B = rewards.shape
    vs, adv = torch.zeros(T, B, dtype=torch.float64), torch.zeros(T, B, dtype=torch.float64)
    for b in range(B):
        V = [float(values[t, b]) for t in range(T)] + [float(bootstrap[b])]
        ratio = [math.exp(float(log_rhos[t, b])) for t in range(T)]
        g = [0.0 if terminated[t, b] else gamma for t in range(T)]
        end = [bool(terminated[t, b] or truncated[t, b]) for t in range(T)]
        delta = [min(rho_bar, ratio[t]) * (float(rewards[t, b]) + g[t] * V[t + 1] - V[t]) for t in range(T)]
        for s in range(T):
            total, weight = 0.0, 1.0
            for t in range(s, T):
                total += weight * delta[t]
                if end[t]:
                    break
                weight *= g[t] * lam * min(c_bar, ratio[t])
            vs[s, b] = V[s] + total
        for s in range(T):
            nxt = V[s + 1] if (s == T - 1 or end[s]) else float(vs[s + 1, b])
            adv[s, b] = min(pg_rho_bar, ratio[s]) * (float(rewards[s, b]) + g[s] * nxt - V[s])
    return vs, adv


def random_batch(T, B, seed, p_term=0.08, p_trunc=0.05, spread=1.0):
    g = torch.Generator().manual_seed(seed)
    u = torch.rand(T, B, generator=g)
    return dict(
        log_rhos=torch.randn(T, B, generator=g, dtype=torch.float64) * spread,
        rewards=torch.randn(T, B, generator=g, dtype=torch.float64),
        values=torch.randn(T, B, generator=g, dtype=torch.float64),
        bootstrap_value=torch.randn(B, generator=g, dtype=torch.float64),
        terminated=u < p_term,
        truncated=(u >= p_term) & (u < p_term + p_trunc),
    )


@pytest.mark.parametrize(
    "params",
    [
        dict(gamma=0.99, lam=1.0, rho_bar=1.0, c_bar=1.0, pg_rho_bar=1.0),  # IMPALA's / Sample Factory's
        dict(gamma=0.9, lam=0.95, rho_bar=2.0, c_bar=0.8, pg_rho_bar=1.5),
        dict(gamma=1.0, lam=0.5, rho_bar=0.5, c_bar=3.0, pg_rho_bar=0.7),
    ],
)
def test_equals_the_step_by_step_definition(params):
    for seed in range(3):
        batch = random_batch(20, 6, seed)
        assert batch["terminated"].any() and batch["truncated"].any()
        out = vtrace(**batch, **params)
        ref_vs, ref_adv = naive_vtrace(*batch.values(), **params)
        torch.testing.assert_close(out.vs, ref_vs)
        torch.testing.assert_close(out.pg_advantages, ref_adv)


def test_hand_computed_cases():
    # Two steps of one env, gamma 0.5, on-policy: V = [1, 2], V(x_2) = 4, rewards [1, 1].
    # v_1 = 1 + 0.5 * 4 = 3; v_0 = 1 + 0.5 * v_1 = 2.5; advantages r + 0.5 v_next - V: 1 + 1.5 - 1 = 1.5, 3 - 2 = 1.
    args = dict(rewards=torch.tensor([[1.0], [1.0]]), values=torch.tensor([[1.0], [2.0]]),
                bootstrap_value=torch.tensor([4.0]), gamma=0.5)  # fmt: skip
    no = torch.zeros(2, 1, dtype=torch.bool)
    out = vtrace(torch.zeros(2, 1), terminated=no, truncated=no, **args)
    assert out.vs.flatten().tolist() == [2.5, 3.0] and out.pg_advantages.flatten().tolist() == [1.5, 1.0]
    # Terminated at step 0: v_0 = r_0 = 1 (no bootstrap, the trace stops); step 1 is the reset step.
    out = vtrace(torch.zeros(2, 1), terminated=torch.tensor([[True], [False]]), truncated=no, **args)
    assert out.vs.flatten().tolist() == [1.0, 3.0] and out.pg_advantages.flatten().tolist() == [0.0, 1.0]
    # Truncated at step 0: bootstraps from V(x_1) = 2 (the final observation), the trace stops: v_0 = 1 + 1 = 2.
    out = vtrace(torch.zeros(2, 1), terminated=no, truncated=torch.tensor([[True], [False]]), **args)
    assert out.vs.flatten().tolist() == [2.0, 3.0] and out.pg_advantages.flatten().tolist() == [1.0, 1.0]
    # Off-policy, ratio e^1 at step 1 clipped to rho_bar = c_bar = 1; ratio e^-1 at step 0 weights its delta:
    # v_1 = 2 + 1 * (1 + 2 - 2) = 3; v_0 = 1 + e^-1 * (1 + 1 - 1) + 0.5 * e^-1 * (3 - 2).
    out = vtrace(torch.tensor([[-1.0], [1.0]]), terminated=no, truncated=no, **args)
    e = math.exp(-1)
    assert out.vs.flatten().tolist() == pytest.approx([1 + e + 0.5 * e, 3.0])
    assert out.pg_advantages.flatten().tolist() == pytest.approx([e * (1 + 1.5 - 1), 1.0])


def test_on_policy_gives_gae_lambda():
    # Ratios 1: v_t - V(x_t) is GAE(lambda) and v_t its return, rlfast.algos.gae with CleanRL's done convention
    # (dones[t] = the previous step ended) on the same rows, reset steps included.
    batch = random_batch(32, 8, seed=5, p_trunc=0.0)
    batch["log_rhos"].zero_()
    out = vtrace(**batch, gamma=0.97, lam=0.9)
    term = batch["terminated"].double()
    dones = torch.cat((torch.zeros(1, 8, dtype=torch.float64), term[:-1]), 0)
    advantages, returns = gae(batch["rewards"], batch["values"], dones, batch["bootstrap_value"], term[-1], 0.97, 0.9)
    torch.testing.assert_close(out.vs, returns)
    torch.testing.assert_close(out.vs - batch["values"], advantages)


def test_no_gradient_through_the_targets_and_bad_shapes():
    batch = random_batch(5, 3, seed=1)
    for key in ("log_rhos", "values", "bootstrap_value"):
        batch[key].requires_grad_(True)
    out = vtrace(**batch, gamma=0.99)
    assert not out.vs.requires_grad and not out.pg_advantages.requires_grad
    with pytest.raises(ValueError, match=r"got \(5, 3\), \(5, 3\), \(5, 3\), \(5,\)"):
        vtrace(**{**batch, "bootstrap_value": torch.zeros(5)}, gamma=0.99)
