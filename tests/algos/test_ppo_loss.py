"""ppo_loss on small hand-computed cases: clipping of ratio and value, KL estimators, coefficients."""

import math

import pytest
import torch

from rlfast.algos.distributions import categorical
from rlfast.algos.ppo import explained_variance, normalize_advantages, ppo_loss


def call(newlogprob, oldlogprob, adv, newvalue=None, oldvalue=None, returns=None, entropy=None, **kw):
    n = len(newlogprob)

    def t(x):
        return torch.tensor(x if x is not None else [0.0] * n, dtype=torch.float64)

    kw = {"clip_coef": 0.2, "ent_coef": 0.0, "vf_coef": 0.0, "norm_adv": False, **kw}
    return ppo_loss(t(newlogprob), t(oldlogprob), t(adv), t(newvalue), t(oldvalue), t(returns), t(entropy), **kw)


def test_unclipped_ratio_gives_minus_ratio_times_advantage():
    out = call([math.log(1.1)], [0.0], [2.0])
    assert out.policy_loss.item() == pytest.approx(-1.1 * 2.0)
    assert out.clipfrac.item() == 0.0


def test_ratio_clipped_only_where_it_helps_the_objective():
    r_hi, r_lo = 1.5, 0.5
    # positive advantage, ratio above 1 + eps: clipped to 1.2 (no incentive to go further)
    assert call([math.log(r_hi)], [0.0], [1.0]).policy_loss.item() == pytest.approx(-1.2)
    # negative advantage, ratio above 1 + eps: the unclipped (worse) term is kept, -(-1)*1.5
    assert call([math.log(r_hi)], [0.0], [-1.0]).policy_loss.item() == pytest.approx(1.5)
    # positive advantage, ratio below 1 - eps: unclipped (worse) term kept
    assert call([math.log(r_lo)], [0.0], [1.0]).policy_loss.item() == pytest.approx(-0.5)
    # negative advantage, ratio below 1 - eps: clipped to 0.8
    assert call([math.log(r_lo)], [0.0], [-1.0]).policy_loss.item() == pytest.approx(0.8)


def test_gradient_vanishes_when_clipped():
    new = torch.tensor([math.log(1.5), math.log(1.05)], dtype=torch.float64, requires_grad=True)
    z = torch.zeros(2, dtype=torch.float64)
    out = ppo_loss(new, z, torch.ones(2, dtype=torch.float64), z, z, z, z, 0.2, 0.0, 0.0, norm_adv=False)
    out.loss.backward()
    assert new.grad[0].item() == 0.0  # clipped sample
    assert new.grad[1].item() == pytest.approx(-1.05 / 2)  # d(-ratio * A)/dlogp / N


def test_kl_estimators_and_clipfrac():
    logr = [math.log(1.5), math.log(0.9), 0.0, math.log(0.7)]
    out = call(logr, [0.0] * 4, [1.0] * 4)
    ratios = [1.5, 0.9, 1.0, 0.7]
    assert out.old_approx_kl.item() == pytest.approx(-sum(logr) / 4)
    assert out.approx_kl.item() == pytest.approx(sum((r - 1) - lr for r, lr in zip(ratios, logr)) / 4)
    assert out.approx_kl.item() >= 0
    assert out.clipfrac.item() == pytest.approx(0.5)  # 1.5 and 0.7 are outside [0.8, 1.2]


def test_value_loss_clipped_and_unclipped():
    # old 0, new 1, return 2: clipped prediction 0.2 -> (1.8)^2 > (1)^2, so max picks the clipped one.
    out = call([0.0], [0.0], [0.0], newvalue=[1.0], oldvalue=[0.0], returns=[2.0], vf_coef=1.0)
    assert out.value_loss.item() == pytest.approx(0.5 * 1.8**2)
    assert out.loss.item() == pytest.approx(0.5 * 1.8**2)
    out = call([0.0], [0.0], [0.0], newvalue=[1.0], oldvalue=[0.0], returns=[2.0], vf_coef=1.0, clip_vloss=False)
    assert out.value_loss.item() == pytest.approx(0.5)


def test_loss_combines_terms_with_coefficients():
    out = call([0.1, -0.2], [0.0, 0.0], [1.0, -2.0], newvalue=[0.5, 0.0], oldvalue=[0.5, 0.0], returns=[1.0, 1.0],
               entropy=[0.6, 0.4], ent_coef=0.01, vf_coef=0.5)  # fmt: skip
    assert out.entropy.item() == pytest.approx(0.5)
    expected = out.policy_loss.item() - 0.01 * 0.5 + 0.5 * out.value_loss.item()
    assert out.loss.item() == pytest.approx(expected)


def test_norm_adv_normalizes_per_minibatch():
    adv = [1.0, 2.0, 3.0, 6.0]
    a = torch.tensor(adv, dtype=torch.float64)
    normed = (a - a.mean()) / (a.std() + 1e-8)
    out = call([0.0] * 4, [0.0] * 4, adv, norm_adv=True)
    assert out.policy_loss.item() == pytest.approx(-normed.mean().item(), abs=1e-12)
    torch.testing.assert_close(normalize_advantages(a), normed)


def test_no_host_sync_types():
    out = call([0.0], [0.0], [1.0])
    assert all(isinstance(t, torch.Tensor) and t.dim() == 0 for t in out)


def test_categorical_matches_torch_distribution():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(64, 5, generator=g)
    actions = torch.randint(0, 5, (64,), generator=g)
    dist = torch.distributions.Categorical(logits=logits)
    a, logprob, entropy = categorical(logits, actions)
    torch.testing.assert_close(logprob, dist.log_prob(actions))
    torch.testing.assert_close(entropy, dist.entropy())
    assert torch.equal(a, actions)
    torch.manual_seed(3)
    sampled, lp, _ = categorical(logits)
    assert sampled.shape == (64,) and sampled.dtype == torch.int64 and 0 <= sampled.min() and sampled.max() < 5
    torch.testing.assert_close(lp, dist.log_prob(sampled))


def test_multi_categorical_is_independent_heads_as_torch_scores_them():
    """MultiDiscrete([3, 2]): the log-probability and entropy add over the heads; actions are float rows."""
    from rlfast.algos.distributions import multi_categorical

    g = torch.Generator().manual_seed(1)
    logits = torch.randn(32, 5, generator=g)
    actions = torch.stack((torch.randint(0, 3, (32,), generator=g), torch.randint(0, 2, (32,), generator=g)), 1)
    heads = [torch.distributions.Categorical(logits=part) for part in logits.split((3, 2), -1)]
    a, logprob, entropy = multi_categorical(logits, (3, 2), actions.float())
    torch.testing.assert_close(logprob, heads[0].log_prob(actions[:, 0]) + heads[1].log_prob(actions[:, 1]))
    torch.testing.assert_close(entropy, heads[0].entropy() + heads[1].entropy())
    assert a.dtype == torch.float32 and torch.equal(a, actions.float())
    sampled, lp, _ = multi_categorical(logits, (3, 2), noise=torch.rand(32, 5, generator=g))
    assert sampled.shape == (32, 2) and sampled[:, 0].max() < 3 and sampled[:, 1].max() < 2
    torch.testing.assert_close(lp, multi_categorical(logits, (3, 2), sampled)[1])


def test_categorical_sampling_frequencies():
    torch.manual_seed(0)
    probs = torch.tensor([0.1, 0.6, 0.3])
    a, _, _ = categorical(probs.log().expand(20000, 3))
    freq = torch.bincount(a, minlength=3).double() / 20000
    torch.testing.assert_close(freq, probs.double(), atol=0.015, rtol=0)  # ~4 sigma at n=20000


def test_explained_variance():
    y = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert explained_variance(y, y).item() == pytest.approx(1.0)
    assert explained_variance(torch.full_like(y, 2.5), y).item() == pytest.approx(0.0)
    assert math.isnan(explained_variance(y, torch.ones(4)).item())


def test_kl_penalty_adds_the_k3_estimate_and_its_gradient():
    new = torch.tensor([0.1, -0.3, 0.2], dtype=torch.float64, requires_grad=True)
    old = torch.tensor([0.0, 0.0, 0.0], dtype=torch.float64)
    zeros = torch.zeros(3, dtype=torch.float64)
    plain = ppo_loss(new, old, zeros, zeros, zeros, zeros, zeros, clip_coef=0.2, ent_coef=0.0, vf_coef=0.0)
    penalized = ppo_loss(new, old, zeros, zeros, zeros, zeros, zeros, clip_coef=0.2, ent_coef=0.0, vf_coef=0.0,
                         kl_coef=0.5)  # fmt: skip
    k3 = ((new.exp() - 1) - new).mean()
    assert penalized.loss.item() == pytest.approx(plain.loss.item() + 0.5 * k3.item())
    assert penalized.approx_kl.item() == pytest.approx(k3.item()) and not penalized.approx_kl.requires_grad
    (grad,) = torch.autograd.grad(penalized.loss, new)
    torch.testing.assert_close(grad, 0.5 * (new.exp() - 1).detach() / 3)  # d/dx mean(e^x - 1 - x) = (e^x - 1) / n
