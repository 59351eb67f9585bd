"""Classic control envs against gymnasium: spaces, seeding, and state-synced step equality."""

import gymnasium as gym
import numpy as np
import pytest
import torch

import rlfast

TASKS = ["CartPole-v1", "Acrobot-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Pendulum-v1"]

# Both sides compute in float64 with the same formulas in the same order; the only source
# of difference is libm vs numpy transcendental functions (sin/cos may differ by one ulp in
# float64). Observations are float32, so after rounding they agree to float32 precision:
# 1e-5 absolute is ~100 float32 ulps at the magnitudes these envs reach.
OBS_ATOL = 1e-5
# Rewards: ours are float32, gymnasium's float64 (Pendulum's is a polynomial of the state).
REWARD_RTOL = 1e-6


def random_actions(space, n, rng):
    if isinstance(space, gym.spaces.Discrete):
        return rng.integers(0, space.n, size=n)
    return rng.uniform(space.low, space.high, size=(n, *space.shape)).astype(np.float32)


@pytest.mark.parametrize("task_id", TASKS)
def test_spaces_equal_gymnasium(task_id):
    ref = gym.make(task_id)
    with rlfast.make(task_id, num_envs=2) as pool:
        assert pool.single_observation_space == ref.observation_space
        assert pool.single_action_space == ref.action_space
        assert pool.max_episode_steps == ref.spec.max_episode_steps
    ref.close()


@pytest.mark.parametrize("task_id", TASKS)
def test_same_seed_same_rollout_other_seed_differs(task_id):
    def rollout(seed):
        rng = np.random.default_rng(0)
        with rlfast.make(task_id, num_envs=4, seed=seed) as pool:
            obs, _ = pool.reset()
            out = [obs.clone()]
            for _ in range(50):
                obs, reward, *_ = pool.step(random_actions(pool.single_action_space, 4, rng))
                out += [obs.clone(), reward.clone()]
        return torch.cat([o.flatten() for o in out])

    assert torch.equal(rollout(1), rollout(1))
    assert not torch.equal(rollout(1), rollout(2))


def sync_gym_from_pool(ref, pool):
    ref.unwrapped.state = np.array(pool._get_state(0), dtype=np.float64)


@pytest.mark.skipif(not rlfast._C.has_test_hooks, reason="built without RLFAST_TEST_HOOKS")
@pytest.mark.parametrize("task_id", TASKS)
def test_state_synced_steps_match_gymnasium(task_id):
    rng = np.random.default_rng(123)
    ref = gym.make(task_id)
    ref.reset(seed=0)
    episodes = 0
    with rlfast.make(task_id, num_envs=1, seed=0) as pool:
        pool.reset()
        sync_gym_from_pool(ref, pool)
        for t in range(600):
            action = random_actions(pool.single_action_space, 1, rng)
            obs, reward, term, trunc, _ = pool.step(action)
            ref_action = action[0] if action.ndim > 1 else int(action[0])
            r_obs, r_reward, r_term, r_trunc, _ = ref.step(ref_action)
            np.testing.assert_allclose(obs[0].numpy(), r_obs, atol=OBS_ATOL, err_msg=f"{task_id} step {t}")
            assert reward[0].item() == pytest.approx(r_reward, rel=REWARD_RTOL), f"{task_id} step {t}"
            assert bool(term[0]) == r_term and bool(trunc[0]) == r_trunc, f"{task_id} step {t}"
            if r_term or r_trunc:
                episodes += 1
                obs, reward, term, trunc, info = pool.step(action)  # next-step autoreset
                assert reward[0] == 0 and not term[0] and info["elapsed_step"][0] == 0
                ref.reset()
                sync_gym_from_pool(ref, pool)
            # Re-sync every step from our state: a one-ulp libm difference must not compound.
            sync_gym_from_pool(ref, pool)
    ref.close()


@pytest.mark.skipif(not rlfast._C.has_test_hooks, reason="built without RLFAST_TEST_HOOKS")
@pytest.mark.parametrize("task_id", TASKS)
def test_free_running_trajectory_matches_gymnasium(task_id):
    """No re-sync after the initial state: 100 steps of identical double arithmetic."""
    rng = np.random.default_rng(7)
    ref = gym.make(task_id)
    ref.reset(seed=0)
    with rlfast.make(task_id, num_envs=1, seed=3) as pool:
        pool.reset()
        sync_gym_from_pool(ref, pool)
        for t in range(100):
            action = random_actions(pool.single_action_space, 1, rng)
            obs, reward, term, trunc, _ = pool.step(action)
            r_obs, r_reward, r_term, r_trunc, _ = ref.step(action[0] if action.ndim > 1 else int(action[0]))
            np.testing.assert_allclose(obs[0].numpy(), r_obs, atol=1e-4, err_msg=f"{task_id} step {t}")
            if r_term or r_trunc:
                break
    ref.close()


def test_continuous_actions_are_clipped_like_gymnasium():
    ref = gym.make("Pendulum-v1")
    ref.reset(seed=0)
    with rlfast.make("Pendulum-v1", num_envs=1) as pool:
        pool.reset()
        sync_gym_from_pool(ref, pool)
        obs, *_ = pool.step(np.array([[50.0]], dtype=np.float32))
        r_obs, *_ = ref.step(np.array([50.0], dtype=np.float32))
        np.testing.assert_allclose(obs[0].numpy(), r_obs, atol=OBS_ATOL)
    ref.close()
