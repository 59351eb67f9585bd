"""DQN pieces (rlfast/algos/dqn.py) against hand computations: the epsilon schedule, epsilon-greedy on the
device, the TD target with and without Double DQN, soft target updates, and the flag checks."""

from dataclasses import dataclass

import pytest
import torch
from torch import nn

from rlfast.algos.dqn import DQNArgs, ReplayRatio, epsilon_greedy, linear_schedule, soft_update, td_loss
from rlfast.algos.runargs import RunArgs


@dataclass
class Args(DQNArgs, RunArgs):
    """DQNArgs composed with the run layer's flags, as a script does."""


def test_linear_schedule_matches_cleanrl():
    assert linear_schedule(1.0, 0.05, 1000, 0) == 1.0
    assert linear_schedule(1.0, 0.05, 1000, 500) == pytest.approx(0.525)
    assert linear_schedule(1.0, 0.05, 1000, 1000) == pytest.approx(0.05)
    assert linear_schedule(1.0, 0.05, 1000, 5000) == 0.05
    args = Args(total_timesteps=2000, exploration_fraction=0.5, start_e=1.0, end_e=0.05)
    assert [args.epsilon(t) for t in (0, 500, 1000, 5000)] == [linear_schedule(1.0, 0.05, 1000, t) for t in
                                                                (0, 500, 1000, 5000)]  # fmt: skip


def test_anneal_lr_is_linear_to_zero_at_the_end_and_off_by_default():
    args = Args(total_timesteps=2000, learning_rate=1e-3)
    assert [args.lr(t) for t in (0, 1000, 3000)] == [1e-3] * 3
    args = Args(total_timesteps=2000, learning_rate=1e-3, anneal_lr=True)
    assert [args.lr(t) for t in (0, 500, 2000, 3000)] == pytest.approx([1e-3, 7.5e-4, 0.0, 0.0])


def test_epsilon_greedy_explores_at_the_rate_asked_and_is_greedy_otherwise():
    q = torch.zeros(20000, 4)
    q[:, 2] = 1.0
    g = torch.Generator().manual_seed(0)
    obs = torch.zeros(20000, 1)
    assert torch.equal(epsilon_greedy(lambda x: q, obs, 0.0, 4, g), torch.full((20000,), 2))
    actions = epsilon_greedy(lambda x: q, obs, 0.4, 4, g)
    # Greedy 60% + a random action that happens to be 2: 10%; the others 10% each.
    freq = torch.bincount(actions, minlength=4).float() / 20000
    assert torch.allclose(freq, torch.tensor([0.1, 0.1, 0.7, 0.1]), atol=0.015), freq
    assert actions.dtype == torch.int64


def test_epsilon_greedy_runs_the_network_only_when_some_env_is_greedy_and_draws_the_same_actions():
    calls = []

    def q_network(x):
        calls.append(x.shape[0])
        return torch.arange(3.0).expand(x.shape[0], 3)  # argmax 2

    obs = torch.zeros(1, 5)
    skipped = [epsilon_greedy(q_network, obs, 1.0, 3, torch.Generator().manual_seed(s)) for s in range(50)]
    assert calls == []  # every env explores: no forward pass
    # The same generator state with the network forced to run: the same random actions wherever env explored.
    for s in range(50):
        g, ref = torch.Generator().manual_seed(s), torch.Generator().manual_seed(s)
        explore = torch.rand(1, generator=ref) < 1.0
        assert torch.equal(torch.where(explore, torch.randint(3, (1,), generator=ref), torch.tensor([2])), skipped[s])
        assert torch.equal(epsilon_greedy(q_network, obs, 1.0, 3, g), skipped[s])
    mixed = epsilon_greedy(q_network, torch.zeros(64, 5), 0.5, 3, torch.Generator().manual_seed(0))
    assert calls == [64] and (mixed == 2).float().mean() > 0.5  # greedy half + a third of the random half


class Table(nn.Module):
    """Q-values looked up by an integer state stored in obs[:, 0]."""

    def __init__(self, values):
        super().__init__()
        self.values = nn.Parameter(torch.tensor(values))

    def forward(self, obs):
        return self.values[obs[:, 0].long()]


def test_td_loss_and_double_dqn_targets():
    online = Table([[1.0, 2.0], [5.0, 3.0]])
    target = Table([[0.5, 0.25], [4.0, 6.0]])
    batch = {"obs": torch.tensor([[0.0], [1.0]]), "next_obs": torch.tensor([[1.0], [1.0]]),
             "actions": torch.tensor([1, 0]), "rewards": torch.tensor([1.0, 2.0]),
             "dones": torch.tensor([0.0, 1.0]), "discounts": torch.tensor([0.5, 0.5])}  # fmt: skip
    loss, q_mean, td = td_loss(online, target, batch)
    # Q(s,a) = [2, 5]; targets: 1 + 0.5 * max(4, 6) = 4, and 2 (done: no bootstrap).
    assert loss.item() == pytest.approx(((2 - 4) ** 2 + (5 - 2) ** 2) / 2) and q_mean.item() == pytest.approx(3.5)
    assert td.tolist() == [2.0, -3.0] and not td.requires_grad  # target - Q(s, a): prioritized replay's errors
    loss, *_ = td_loss(online, target, batch, double=True)
    # Double DQN: the online network picks argmax(5, 3) = action 0 in state 1, the target values it at 4.
    assert loss.item() == pytest.approx(((2 - 3) ** 2 + (5 - 2) ** 2) / 2)
    loss, *_ = td_loss(online, target, {**batch, "discounts": torch.tensor([0.25, 0.5])})
    # An n-step return over 2 steps bootstraps with gamma^2: 1 + 0.25 * 6 = 2.5.
    assert loss.item() == pytest.approx(((2 - 2.5) ** 2 + (5 - 2) ** 2) / 2)
    loss.backward()
    assert target.values.grad is None and online.values.grad is not None  # no gradient through the target
    # Huber (delta 1): errors of 1 and 3 (double targets) cost 0.5 * 1^2 and 3 - 0.5; the gradient of the larger
    # one is clipped to 1 (Mnih et al. 2015), where MSE's is 2 x 3 / 2
    online.values.grad = None
    loss, *_ = td_loss(online, target, batch, double=True, huber=True)
    assert loss.item() == pytest.approx((0.5 + 2.5) / 2)
    loss.backward()
    assert online.values.grad[1, 0].item() == pytest.approx(1 / 2) and online.values.grad[0, 1].item() == -0.5


@pytest.mark.parametrize("huber", [False, True])
def test_td_loss_weights_each_transition_by_its_importance_weight(huber):
    online = Table([[1.0, 2.0], [5.0, 3.0]])
    target = Table([[0.5, 0.25], [4.0, 6.0]])
    batch = {"obs": torch.tensor([[0.0], [1.0]]), "next_obs": torch.tensor([[1.0], [1.0]]),
             "actions": torch.tensor([1, 0]), "rewards": torch.tensor([1.0, 2.0]),
             "dones": torch.tensor([0.0, 1.0]), "discounts": torch.tensor([0.5, 0.5])}  # fmt: skip
    # errors 2 and -3 (above): each one's loss, weighted 0.25 and 1, averaged over the batch
    each = [2 - 0.5, 3 - 0.5] if huber else [4.0, 9.0]
    loss, _, td = td_loss(online, target, {**batch, "weights": torch.tensor([0.25, 1.0])}, huber=huber)
    assert loss.item() == pytest.approx((0.25 * each[0] + each[1]) / 2) and td.tolist() == [2.0, -3.0]
    ones, *_ = td_loss(online, target, {**batch, "weights": torch.ones(2)}, huber=huber)
    assert ones.item() == pytest.approx(td_loss(online, target, batch, huber=huber)[0].item())


def test_the_importance_exponent_rises_from_priority_beta_to_1_at_the_end():
    args = Args(total_timesteps=1000, priority_beta=0.4)
    assert [args.beta(t) for t in (0, 500, 1000, 2000)] == pytest.approx([0.4, 0.7, 1.0, 1.0])
    assert Args(priority_beta=1.0).beta(0) == 1.0
    assert Args(priority_alpha=0.6).validate() == ["--priority-alpha: no effect without --prioritized"]
    assert Args(priority_alpha=0.6, prioritized=True).validate() == []
    problems = Args(priority_alpha=-1, priority_beta=2, priority_eps=0, prioritized=True).validate()
    assert [p.split(" must")[0] for p in problems] == ["--priority-alpha", "--priority-beta", "--priority-eps"]


def test_soft_update():
    online, target = Table([[1.0, 2.0]]), Table([[3.0, 6.0]])
    soft_update(target, online, 0.25)
    assert target.values.tolist() == [[2.5, 5.0]]
    soft_update(target, online, 1.0)
    assert target.values.tolist() == [[1.0, 2.0]]


def test_flag_checks():
    assert Args().validate() == []
    problems = Args(learning_starts=64, replay_ratio=0, gamma=2.0).validate()
    assert any(p.startswith("--replay-ratio must be > 0") for p in problems)
    assert any(p.startswith("--gamma must be in [0, 1]") for p in problems)
    assert any(p.startswith("--learning-starts 64 must be >= --batch-size 128") for p in problems)
    assert Args(buffer_size=100, num_envs=4).validate() == [
        "--buffer-size 100 must hold --batch-size 128 transitions and 5 more steps per env: at least 148"
    ]
    assert Args(buffer_size=147, num_envs=4, n_step=0).validate() == ["--n-step must be >= 1, got 0"]
    assert Args(buffer_size=147, num_envs=4, n_step=3).validate() == [
        "--buffer-size 147 must hold --batch-size 128 transitions and 7 more steps per env: at least 156"
    ]


def test_replay_ratio_schedules_gradient_steps_and_target_updates():
    args = Args(num_envs=4, batch_size=32, replay_ratio=2.0, learning_starts=100, target_network_frequency=50)
    schedule = ReplayRatio(args, global_step=0)
    # before learning starts, or with less than a batch buffered: nothing (and nothing owed later)
    assert schedule.gradient_steps(100, 4, buffered=1000) == 0
    assert schedule.gradient_steps(104, 4, buffered=31) == 0
    # 4 env steps x 2 samples / 32 per batch = 0.25 gradient steps each: one every 4th vector step
    assert [schedule.gradient_steps(104 + 4 * k, 4, buffered=1000) for k in range(1, 9)] == [0, 0, 0, 1] * 2
    # target updates every 50 env steps, whatever the vector steps' size
    assert [s for s in range(4, 204, 4) if schedule.target_update(s)] == [52, 100, 152, 200]
