"""The adaptive learning rate (--kl-adaptive-lr) and the flags that turn on the MuJoCo trainer's options."""

from dataclasses import dataclass

import pytest
import torch
from torch import nn

from rlfast.algos.ppo import LOSS_NAMES, PPOArgs, PPOLoss, adapt_lr
from rlfast.algos.runargs import RunArgs


@dataclass
class Args(PPOArgs, RunArgs):
    """PPOArgs composed with the run layer's flags, as a script does."""


def optimizer(lr=1e-3):
    return torch.optim.Adam(nn.Linear(2, 1).parameters(), lr=lr)


@pytest.mark.parametrize(
    "kl,lr",
    [(0.05, 1e-3 / 1.5), (0.016, 1e-3), (0.008, 1e-3), (0.004, 1e-3), (0.001, 1.5e-3)],
)
def test_adapt_lr_moves_only_outside_the_band(kl, lr):
    opt = optimizer()
    adapt_lr(opt, kl, target=0.008, lr_max=1e-2)
    assert opt.param_groups[0]["lr"] == pytest.approx(lr)


def test_adapt_lr_stays_within_its_bounds():
    opt = optimizer(9e-3)
    adapt_lr(opt, 0.0, target=0.008, lr_max=1e-2)
    assert opt.param_groups[0]["lr"] == 1e-2
    opt = optimizer(1.2e-6)
    adapt_lr(opt, 1.0, target=0.008, lr_max=1e-2)
    assert opt.param_groups[0]["lr"] == 1e-6


def test_the_update_adapts_the_rate_once_per_epoch_from_the_epochs_mean_kl(load_script):
    # A loss whose approx KL is whatever the test says: 3 epochs at a KL far below the target raise the rate
    # three times (once per epoch, not per minibatch), and a KL far above lowers it.
    ppo = load_script("ppo.py")
    args = ppo.Args(num_envs=2, num_steps=4, update_epochs=3, num_minibatches=2, kl_adaptive_lr=0.01, lr_max=1.0,
                    anneal_lr=False)  # fmt: skip
    agent = ppo.Agent(3, 2)
    rollout = ppo.Rollout(4, 2, (3,))
    rollout.obs.normal_()

    def run(kl):
        opt = torch.optim.Adam(agent.parameters(), lr=1e-4)

        def loss_fn(agent, args, mb):
            loss = agent.get_value(mb["obs"]).pow(2).mean()
            stats = [torch.tensor(kl if name == "approx_kl" else 0.0) for name in LOSS_NAMES]
            return PPOLoss(loss, *stats)

        scalars = ppo.update(agent, opt, loss_fn, rollout, torch.zeros(2, 3), torch.zeros(2), torch.zeros(2),
                             args)  # fmt: skip
        assert scalars["losses/approx_kl"] == pytest.approx(kl)
        assert scalars["charts/learning_rate"] == opt.param_groups[0]["lr"]
        return opt.param_groups[0]["lr"]

    assert run(0.0) == pytest.approx(1e-4 * 1.5**3)
    assert run(1.0) == pytest.approx(1e-4 / 1.5**3)
    assert run(0.01) == pytest.approx(1e-4)


def test_target_kl_stops_the_epochs_after_the_first_minibatch_above_it(load_script):
    ppo = load_script("ppo.py")
    args = ppo.Args(num_envs=2, num_steps=4, update_epochs=4, num_minibatches=2, target_kl=0.5)
    agent, rollout = ppo.Agent(3, 2), ppo.Rollout(4, 2, (3,))
    calls = []

    def loss_fn(agent, args, mb):
        calls.append(1)
        return PPOLoss(agent.get_value(mb["obs"]).pow(2).mean(), *[torch.tensor(1.0)] * len(LOSS_NAMES))

    ppo.update(agent, torch.optim.Adam(agent.parameters()), loss_fn, rollout, torch.zeros(2, 3), torch.zeros(2),
               torch.zeros(2), args)  # fmt: skip
    assert len(calls) == 2  # the whole first epoch (2 minibatches), then the stop


def test_flags_are_checked():
    assert Args().validate() == []
    assert Args(kl_adaptive_lr=0.008, anneal_lr=False).validate() == []
    assert Args(kl_adaptive_lr=0.008).validate() == [
        "--kl-adaptive-lr sets the learning rate itself: add --no-anneal-lr"]  # fmt: skip
    assert Args(kl_adaptive_lr=-1.0, anneal_lr=False).validate() == ["--kl-adaptive-lr must be > 0, got -1.0"]
    assert Args(kl_adaptive_lr=0.01, anneal_lr=False, lr_max=1e-5).validate() == [
        "--lr-max 1e-05 is below --learning-rate 0.00025"
    ]


@pytest.mark.parametrize("script", ["ppo.py", "ppo_atari.py"])
def test_bootstrap_truncated_changes_the_update_only_where_an_episode_was_truncated(load_script, script):
    """--bootstrap-truncated (read by every PPO trainer): a truncation bootstraps V(final obs), so the update differs
    from CleanRL's; where every episode end is a termination, the two are the same."""
    ppo = load_script(script)
    atari = script == "ppo_atari.py"
    obs_shape = (4, 84, 84) if atari else (3,)

    def updated(bootstrap: bool, terminated: bool) -> torch.Tensor:
        torch.manual_seed(0)
        g = torch.Generator().manual_seed(0)
        args = ppo.Args(num_envs=2, num_steps=4, update_epochs=1, num_minibatches=1, bootstrap_truncated=bootstrap)
        agent = ppo.Agent(4, 2) if atari else ppo.Agent(3, 2)
        rollout = ppo.Rollout(4, 2, obs_shape, obs_dtype=torch.uint8 if atari else torch.float32)
        rollout.obs.copy_(torch.randint(0, 255, rollout.obs.shape, generator=g) if atari else
                          torch.randn(rollout.obs.shape, generator=g))  # fmt: skip
        rollout.rewards.fill_(1.0)
        rollout.values.fill_(5.0)  # V(obs[2]), env 0's final observation, is what a truncation bootstraps
        rollout.dones[2, 0] = 1.0  # env 0's episode ended before step 2
        rollout.terminations[2, 0] = 1.0 if terminated else 0.0
        opt = torch.optim.Adam(agent.parameters(), lr=1e-2)
        next_obs = torch.zeros((2, *obs_shape), dtype=rollout.obs.dtype)
        ppo.update(agent, opt, ppo.minibatch_loss, rollout, next_obs, torch.zeros(2), torch.zeros(2), args)
        return torch.cat([p.detach().flatten() for p in agent.parameters()])

    assert torch.equal(updated(False, True), updated(True, True))  # a termination: the same either way
    assert not torch.equal(updated(False, False), updated(True, False))  # a truncation: V(final obs) bootstrapped
