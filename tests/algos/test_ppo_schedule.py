"""The adaptive learning rate (--kl-adaptive-lr) and the flags that turn on the MuJoCo trainer's options."""

import pytest
import torch
from torch import nn

from rlfast.algos.ppo import LOSS_NAMES, PPOArgs, PPOLoss, adapt_lr, ppo_update


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


def test_ppo_update_adapts_the_rate_once_per_epoch_from_the_epochs_mean_kl():
    # A loss whose approx KL is whatever the test says: 3 epochs at a KL far below the target raise the rate
    # three times (once per epoch, not per minibatch), and a KL far above lowers it.
    model = nn.Linear(3, 1)
    batch = {"x": torch.randn(8, 3)}

    def run(kl):
        opt = torch.optim.Adam(model.parameters(), lr=1e-4)

        def loss_fn(mb):
            loss = model(mb["x"]).pow(2).mean()
            stats = [torch.tensor(kl if name == "approx_kl" else 0.0) for name in LOSS_NAMES]
            return PPOLoss(loss, *stats)

        ppo_update(loss_fn, opt, model.parameters(), batch, update_epochs=3, num_minibatches=2, max_grad_norm=1.0,
                   kl_adaptive_lr=0.01, lr_max=1.0)  # fmt: skip
        return opt.param_groups[0]["lr"]

    assert run(0.0) == pytest.approx(1e-4 * 1.5**3)
    assert run(1.0) == pytest.approx(1e-4 / 1.5**3)
    assert run(0.01) == pytest.approx(1e-4)


def test_flags_are_checked():
    assert PPOArgs().validate() == []
    assert PPOArgs(kl_adaptive_lr=0.008, anneal_lr=False).validate() == []
    assert PPOArgs(kl_adaptive_lr=0.008).validate() == ["--kl-adaptive-lr sets the learning rate itself: add --no-anneal-lr"]
    assert PPOArgs(kl_adaptive_lr=-1.0, anneal_lr=False).validate() == ["--kl-adaptive-lr must be > 0, got -1.0"]
    assert PPOArgs(kl_adaptive_lr=0.01, anneal_lr=False, lr_max=1e-5).validate() == [
        "--lr-max 1e-05 is below --learning-rate 0.00025"
    ]
