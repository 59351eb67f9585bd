"""The adaptive learning rate (--kl-adaptive-lr), the entropy schedule (--ent-coef-final) and the flags that turn on the
MuJoCo trainer's options."""

from dataclasses import dataclass

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch import nn

from rlfast.algos.ppo import LOSS_NAMES, PPOArgs, PPOLoss, adapt_lr, entropy_coef
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

        def loss_fn(agent, args, mb, ent_coef):
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

    def loss_fn(agent, args, mb, ent_coef):
        calls.append(1)
        return PPOLoss(agent.get_value(mb["obs"]).pow(2).mean(), *[torch.tensor(1.0)] * len(LOSS_NAMES))

    ppo.update(agent, torch.optim.Adam(agent.parameters()), loss_fn, rollout, torch.zeros(2, 3), torch.zeros(2),
               torch.zeros(2), args)  # fmt: skip
    assert len(calls) == 2  # the whole first epoch (2 minibatches), then the stop


def test_entropy_coef_is_constant_unless_annealed_then_linear_and_held():
    assert entropy_coef(Args(ent_coef=0.02), 10**9) == 0.02  # CleanRL: no schedule
    args = Args(ent_coef=0.01, ent_coef_final=0.001, ent_anneal_steps=1000)
    assert [entropy_coef(args, s) for s in (0, 500, 1000, 5000)] == pytest.approx([0.01, 0.0055, 0.001, 0.001])
    whole_run = Args(ent_coef=0.01, ent_coef_final=0.0, total_timesteps=4000)  # no span: the whole run
    assert [entropy_coef(whole_run, s) for s in (0, 1000, 4000)] == pytest.approx([0.01, 0.0075, 0.0])
    rising = Args(ent_coef=0.0, ent_coef_final=0.01, ent_anneal_steps=100)  # either direction
    assert entropy_coef(rising, 25) == pytest.approx(0.0025)


SCHEDULED_RUNS = {
    "ppo.py": dict(env_id="CartPole-v1", num_envs=2, num_steps=16),
    "ppo_atari.py": dict(env_id="Pong-v5", num_envs=2, num_steps=16, cnn_width=0.25, auto_speed=False),
    "ppo_atari_lstm.py": dict(env_id="Pong-v5", num_envs=2, num_steps=16, auto_speed=False),
    "ppo_continuous.py": dict(env_id="Pendulum-v1", num_envs=2, num_steps=16),
}


@pytest.mark.parametrize("script", sorted(SCHEDULED_RUNS))
def test_every_ppo_trainer_weights_the_entropy_by_the_schedule_of_its_iteration(load_script, script, tmp_path):
    """Each update's loss gets ``entropy_coef`` of the steps before the iteration and weights the entropy by it (one
    more unit of weight lowers the loss by the entropy), and charts/ent_coef logs it."""
    ppo = load_script(script)
    weights, weighted, loss = [], [], ppo.minibatch_loss

    def spy(agent, args, mb, ent_coef):
        weights.append(float(ent_coef))
        with torch.no_grad():
            now, more = loss(agent, args, mb, ent_coef), loss(agent, args, mb, ent_coef + 1.0)
        weighted.append(torch.allclose(now.loss - more.loss, now.entropy, rtol=1e-4, atol=1e-6))
        return loss(agent, args, mb, ent_coef)

    ppo.minibatch_loss = spy
    args = ppo.Args(**SCHEDULED_RUNS[script], num_minibatches=1, update_epochs=1, total_timesteps=4 * 32,
                    ent_coef=0.04, ent_coef_final=0.01, ent_anneal_steps=64, cuda=False, torch_threads=1,
                    runs_dir=str(tmp_path / "runs"), save_interval=0)  # fmt: skip
    assert ppo.main(args) == 0
    expected = [0.04, 0.025, 0.01, 0.01]  # after 0, 32, 64 and 96 steps
    assert weights == pytest.approx(expected) and all(weighted)
    acc = EventAccumulator(str(next((tmp_path / "runs").iterdir())))
    acc.Reload()
    assert [e.value for e in acc.Scalars("charts/ent_coef")] == pytest.approx(expected)


def test_flags_are_checked():
    assert Args().validate() == []
    assert Args(kl_adaptive_lr=0.008, anneal_lr=False).validate() == []
    assert Args(kl_adaptive_lr=0.008).validate() == [
        "--kl-adaptive-lr sets the learning rate itself: add --no-anneal-lr"]  # fmt: skip
    assert Args(kl_adaptive_lr=-1.0, anneal_lr=False).validate() == ["--kl-adaptive-lr must be > 0, got -1.0"]
    assert Args(kl_adaptive_lr=0.01, anneal_lr=False, lr_max=1e-5).validate() == [
        "--lr-max 1e-05 is below --learning-rate 0.00025"
    ]
    assert Args(ent_coef_final=0.001, ent_anneal_steps=10).validate() == []
    assert Args(ent_anneal_steps=10).validate() == ["--ent-anneal-steps 10 schedules nothing without --ent-coef-final"]
    assert Args(ent_coef_final=-0.1).validate() == ["--ent-coef-final must be >= 0 (or left out), got -0.1"]
    assert Args(ent_coef_final=0.0, ent_anneal_steps=0).validate() == [
        "--ent-anneal-steps must be >= 1 (or left out), got 0"
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
