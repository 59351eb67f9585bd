"""Classic control envs against gymnasium: spaces, seeding, and state-synced step equality."""

import contextlib

import gymnasium as gym
import numpy as np
import pytest
import torch

import rlfast

pytestmark = pytest.mark.wheel

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


@contextlib.contextmanager
def beside_gymnasium(task_id, **make_kwargs):
    """``(pool, ref)``: a pool of one ``task_id`` env (``make_kwargs``: its seed) and gymnasium's env, reset and set
    to the pool's state."""
    ref = gym.make(task_id)
    ref.reset(seed=0)
    try:
        with rlfast.make(task_id, num_envs=1, **make_kwargs) as pool:
            pool.reset()
            sync_gym_from_pool(ref, pool)
            yield pool, ref
    finally:
        ref.close()


def random_steps_beside_gymnasium(task_id, seed, steps, rng):
    """``steps`` steps of ``beside_gymnasium(task_id, seed=seed)``'s two envs, both given the same random actions
    (from ``rng``): yields ``(t, pool, ref, action, ours, theirs)`` after step ``t``, ``ours`` and ``theirs`` what
    each env's ``step`` returned."""
    with beside_gymnasium(task_id, seed=seed) as (pool, ref):
        for t in range(steps):
            action = random_actions(pool.single_action_space, 1, rng)
            ours = pool.step(action)
            yield t, pool, ref, action, ours, ref.step(action[0] if action.ndim > 1 else int(action[0]))


@pytest.mark.skipif(not rlfast._C.has_test_hooks, reason="built without RLFAST_TEST_HOOKS")
@pytest.mark.parametrize("task_id", TASKS)
def test_state_synced_steps_match_gymnasium(task_id):
    rng = np.random.default_rng(123)
    episodes = 0
    for t, pool, ref, action, ours, theirs in random_steps_beside_gymnasium(task_id, 0, 600, rng):
        (obs, reward, term, trunc, _), (r_obs, r_reward, r_term, r_trunc, _) = ours, theirs
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


@pytest.mark.skipif(not rlfast._C.has_test_hooks, reason="built without RLFAST_TEST_HOOKS")
@pytest.mark.parametrize("task_id", TASKS)
def test_free_running_trajectory_matches_gymnasium(task_id):
    """No re-sync after the initial state: 100 steps of identical double arithmetic."""
    rng = np.random.default_rng(7)
    for t, _, _, _, (obs, *_), (r_obs, _, r_term, r_trunc, _) in random_steps_beside_gymnasium(task_id, 3, 100, rng):
        np.testing.assert_allclose(obs[0].numpy(), r_obs, atol=1e-4, err_msg=f"{task_id} step {t}")
        if r_term or r_trunc:
            break


def test_continuous_actions_are_clipped_like_gymnasium():
    with beside_gymnasium("Pendulum-v1") as (pool, ref):
        obs, *_ = pool.step(np.array([[50.0]], dtype=np.float32))
        r_obs, *_ = ref.step(np.array([50.0], dtype=np.float32))
        np.testing.assert_allclose(obs[0].numpy(), r_obs, atol=OBS_ATOL)
