"""gae() against a per-element Python loop of CleanRL's formula, with episode ends inside the rollout."""

import pytest
import torch

from rlfast.algos.gae import gae


def naive_gae(rewards, values, dones, next_value, next_done, gamma, lam):
    T, B = rewards.shape
    adv = [[0.0] * B for _ in range(T)]
    for b in range(B):
        last = 0.0
        for t in reversed(range(T)):
            if t == T - 1:
                nonterminal, nextv = 1.0 - float(next_done[b]), float(next_value[b])
            else:
                nonterminal, nextv = 1.0 - float(dones[t + 1, b]), float(values[t + 1, b])
            delta = float(rewards[t, b]) + gamma * nextv * nonterminal - float(values[t, b])
            last = delta + gamma * lam * nonterminal * last
            adv[t][b] = last
    adv = torch.tensor(adv, dtype=torch.float64)
    return adv, adv + values.double()


@pytest.mark.parametrize("gamma,lam", [(0.99, 0.95), (0.9, 1.0), (1.0, 0.0)])
def test_gae_matches_naive_loop_with_dones(gamma, lam):
    g = torch.Generator().manual_seed(0)
    T, B = 17, 5
    rewards = torch.randn(T, B, generator=g)
    values = torch.randn(T, B, generator=g)
    dones = (torch.rand(T, B, generator=g) < 0.2).float()
    next_value = torch.randn(B, generator=g)
    next_done = torch.tensor([0.0, 1.0, 0.0, 1.0, 0.0])
    assert dones.sum() > 0
    adv, ret = gae(rewards, values, dones, next_value, next_done, gamma, lam)
    ref_adv, ref_ret = naive_gae(rewards, values, dones, next_value, next_done, gamma, lam)
    torch.testing.assert_close(adv.double(), ref_adv, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ret.double(), ref_ret, rtol=1e-5, atol=1e-5)
    assert adv.shape == (T, B) and adv.dtype == torch.float32


def test_gae_hand_computed_episode_end():
    # One env, 3 steps. obs[2] follows an episode end (dones[2] = 1), so step 1 is terminal.
    rewards = torch.tensor([[1.0], [2.0], [0.0]])
    values = torch.tensor([[0.5], [1.0], [3.0]])
    dones = torch.tensor([[0.0], [0.0], [1.0]])
    next_value, next_done = torch.tensor([4.0]), torch.tensor([0.0])
    gamma, lam = 0.5, 0.5
    a2 = 0.0 + gamma * 4.0 - 3.0  # reset step: bootstraps into the new episode
    a1 = 2.0 - 1.0  # terminal: no bootstrap, and nothing flows back from step 2
    a0 = (1.0 + gamma * 1.0 - 0.5) + gamma * lam * a1
    adv, ret = gae(rewards, values, dones, next_value, next_done, gamma, lam)
    torch.testing.assert_close(adv, torch.tensor([[a0], [a1], [a2]]))
    torch.testing.assert_close(ret, adv + values)


def test_gae_next_done_stops_bootstrap():
    rewards, values = torch.ones(2, 1), torch.zeros(2, 1)
    dones = torch.zeros(2, 1)
    adv_live, _ = gae(rewards, values, dones, torch.tensor([10.0]), torch.tensor([0.0]), 1.0, 1.0)
    adv_done, _ = gae(rewards, values, dones, torch.tensor([10.0]), torch.tensor([1.0]), 1.0, 1.0)
    torch.testing.assert_close(adv_live[:, 0], torch.tensor([12.0, 11.0]))
    torch.testing.assert_close(adv_done[:, 0], torch.tensor([2.0, 1.0]))


def test_gae_accepts_bool_dones():
    g = torch.Generator().manual_seed(1)
    rewards, values = torch.randn(6, 3, generator=g), torch.randn(6, 3, generator=g)
    dones = torch.rand(6, 3, generator=g) < 0.3
    nv, nd = torch.randn(3, generator=g), torch.tensor([True, False, True])
    a, _ = gae(rewards, values, dones, nv, nd, 0.99, 0.95)
    b, _ = gae(rewards, values, dones.float(), nv, nd.float(), 0.99, 0.95)
    torch.testing.assert_close(a, b)


def test_gae_bootstraps_a_truncation_from_the_final_observation():
    # The same rollout as test_gae_hand_computed_episode_end, but the episode was truncated (time limit):
    # step 1 bootstraps from V(obs[2]) = 3.0, the final observation kept at the reset step; nothing flows
    # back from step 2's advantage (a new episode).
    rewards = torch.tensor([[1.0], [2.0], [0.0]])
    values = torch.tensor([[0.5], [1.0], [3.0]])
    dones = torch.tensor([[0.0], [0.0], [1.0]])
    terminations = torch.zeros(3, 1)
    next_value, next_done = torch.tensor([4.0]), torch.tensor([0.0])
    gamma, lam = 0.5, 0.5
    a2 = 0.0 + gamma * 4.0 - 3.0
    a1 = 2.0 + gamma * 3.0 - 1.0
    a0 = (1.0 + gamma * 1.0 - 0.5) + gamma * lam * a1
    adv, ret = gae(rewards, values, dones, next_value, next_done, gamma, lam, terminations, torch.zeros(1))
    torch.testing.assert_close(adv, torch.tensor([[a0], [a1], [a2]]))
    # Terminations equal to the dones give CleanRL's estimate exactly; a truncation at the rollout's end
    # bootstraps from next_value.
    g = torch.Generator().manual_seed(1)
    r, v = torch.randn(9, 4, generator=g), torch.randn(9, 4, generator=g)
    d = (torch.rand(9, 4, generator=g) < 0.3).float()
    nv, nd = torch.randn(4, generator=g), torch.tensor([1.0, 0.0, 1.0, 0.0])
    torch.testing.assert_close(gae(r, v, d, nv, nd, 0.9, 0.8, d, nd), gae(r, v, d, nv, nd, 0.9, 0.8))
    truncated_end = gae(r, v, d, nv, nd, 0.9, 0.8, d, torch.zeros(4))[0][-1]
    torch.testing.assert_close(truncated_end, r[-1] + 0.9 * nv - v[-1])
    with pytest.raises(ValueError, match="together"):
        gae(r, v, d, nv, nd, 0.9, 0.8, d)
