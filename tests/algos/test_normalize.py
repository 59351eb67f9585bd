"""normalize.py against gymnasium on the same streams: RunningMeanStd, vector NormalizeObservation
and vector NormalizeReward (next-step autoreset).

Tolerances: float64 statistics agree to 1e-10 relative (the same formula, evaluated in a
slightly different order); float32 ones to 1e-5 (a few float32 ulps over 50 updates).
"""

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.wrappers.utils import RunningMeanStd as GymRMS

import rlfast
from rlfast.algos.normalize import ObsNormalizer, RewardScaler, RunningMeanStd


def test_running_mean_std_matches_gymnasium():
    rng = np.random.default_rng(0)
    ours, ref = RunningMeanStd((3,)), GymRMS(shape=(3,))
    for i in range(50):
        x = rng.normal(loc=[1.0, -2.0, 5.0], scale=[0.5, 3.0, 10.0], size=(1 + i % 7, 3))
        ours.update(torch.from_numpy(x))
        ref.update(x)
    np.testing.assert_allclose(ours.mean.numpy(), ref.mean, rtol=1e-10)
    np.testing.assert_allclose(ours.var.numpy(), ref.var, rtol=1e-10)
    assert ours.count.item() == pytest.approx(ref.count, rel=1e-12)


def test_masked_update_equals_update_on_selected_rows():
    rng = np.random.default_rng(1)
    masked, plain = RunningMeanStd(()), RunningMeanStd(())
    for _ in range(20):
        x = torch.from_numpy(rng.normal(size=8))
        mask = torch.from_numpy(rng.random(8) < 0.5)
        masked.update(x, mask=mask)
        if mask.any():
            plain.update(x[mask])
    torch.testing.assert_close(masked.mean, plain.mean, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(masked.var, plain.var, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(masked.count, plain.count)
    before = masked.state_dict()
    masked.update(torch.ones(8, dtype=torch.float64), mask=torch.zeros(8, dtype=torch.bool))
    for key, value in masked.state_dict().items():
        assert torch.equal(value, before[key]), key


def test_state_dict_round_trip():
    a = RunningMeanStd((2,))
    a.update(torch.randn(10, 2, dtype=torch.float64))
    b = RunningMeanStd((2,))
    b.load_state_dict(a.state_dict())
    x = torch.randn(5, 2, dtype=torch.float64)
    a.update(x)
    b.update(x)
    assert torch.equal(a.mean, b.mean) and torch.equal(a.var, b.var) and torch.equal(a.count, b.count)


def test_obs_normalizer_matches_gymnasium_normalize_observation():
    # The same observation stream goes through both: feed rlfast's obs into gymnasium's wrapper
    # logic by replaying them through its RunningMeanStd via the wrapper's observations().
    pool = rlfast.make("Pendulum-v1", 4, seed=0)
    ref = gym.wrappers.vector.NormalizeObservation(gym.make_vec("Pendulum-v1", num_envs=4, vectorization_mode="sync"))
    ours = ObsNormalizer((3,))
    obs, _ = pool.reset()
    rng = np.random.default_rng(0)
    for _ in range(50):
        x = obs.clone()
        got = ours(x)
        want = ref.observations(x.numpy())
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
        obs, *_ = pool.step(rng.uniform(-2, 2, size=(4, 1)).astype(np.float32))
    np.testing.assert_allclose(ours.rms.mean.numpy(), ref.obs_rms.mean, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours.rms.var.numpy(), ref.obs_rms.var, rtol=1e-5, atol=1e-6)
    ours.update = False
    frozen = ours.rms.state_dict()
    ours(torch.ones(4, 3))
    assert torch.equal(ours.rms.mean, frozen["mean"])
    pool.close()


class RecordReward(gym.vector.VectorWrapper):
    """Keeps the raw reward of the last step (what NormalizeReward above it scales)."""

    def step(self, actions):
        obs, reward, terminated, truncated, info = super().step(actions)
        self.last_reward = reward
        return obs, reward, terminated, truncated, info


def test_reward_scaler_matches_gymnasium_normalize_reward():
    # gymnasium's NormalizeReward over its CartPole vector env (next-step autoreset), and ours fed
    # the same raw reward / terminated / truncated stream, episode ends and reset steps included.
    n, gamma = 3, 0.9
    base = gym.make_vec(
        "CartPole-v1", num_envs=n, vectorization_mode="sync", vector_kwargs={"autoreset_mode": "NextStep"}
    )
    raw = RecordReward(base)
    env = gym.wrappers.vector.NormalizeReward(raw, gamma=gamma)
    env.reset(seed=0)
    scaler = RewardScaler(n, gamma=gamma)
    rng = np.random.default_rng(0)
    ends = 0
    for _ in range(300):
        _, scaled, terminated, truncated, _ = env.step(rng.integers(0, 2, size=n))
        reward = torch.from_numpy(raw.last_reward).float()
        ours = scaler(reward, torch.from_numpy(terminated), torch.from_numpy(truncated))
        np.testing.assert_allclose(ours.numpy(), scaled, rtol=1e-5, atol=1e-7)
        ends += int((terminated | truncated).sum())
    assert ends > 10
    np.testing.assert_allclose(scaler.rms.var.item(), env.return_rms.var, rtol=1e-6)
    np.testing.assert_allclose(scaler.returns.numpy(), env.accumulated_reward, rtol=1e-6)
    restored = RewardScaler(n, gamma=0.5)
    restored.load_state_dict(scaler.state_dict())
    assert restored.gamma == gamma and torch.equal(restored.rms.var, scaler.rms.var)
