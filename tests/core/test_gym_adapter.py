"""The gymnasium VectorEnv adapter: numpy in/out, gymnasium's API and autoreset metadata."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

import rlfast


def test_adapter_speaks_gymnasium_vector_api():
    env = rlfast.make_gymnasium("CartPole-v1", num_envs=3, seed=1)
    assert isinstance(env, gym.vector.VectorEnv)
    assert env.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    ref = gym.make_vec("CartPole-v1", num_envs=3, vectorization_mode="sync")
    assert env.single_observation_space == ref.single_observation_space
    assert env.single_action_space == ref.single_action_space
    assert env.observation_space == ref.observation_space
    assert env.action_space == ref.action_space
    obs, info = env.reset(seed=7)
    assert isinstance(obs, np.ndarray) and obs.shape == (3, 4) and obs.dtype == np.float32
    assert env.observation_space.contains(obs)
    obs2, _ = env.reset(seed=7)
    np.testing.assert_array_equal(obs, obs2)
    for _ in range(600):
        obs, reward, term, trunc, info = env.step(env.action_space.sample())
        assert reward.dtype == np.float64 and term.dtype == np.bool_ and info["env_id"].tolist() == [0, 1, 2]
    assert env.observation_space.contains(obs)
    env.close()
    ref.close()


def test_adapter_returns_copies_not_views():
    env = rlfast.make_gymnasium("CartPole-v1", num_envs=2)
    obs0, _ = env.reset()
    keep = obs0.copy()
    for _ in range(5):
        env.step(np.ones(2, dtype=np.int64))
    np.testing.assert_array_equal(obs0, keep)
    env.close()


def test_adapter_same_step_mode_has_final_obs_mask():
    env = rlfast.make_gymnasium("Dummy-v0", num_envs=2, episode_length=2, autoreset_mode="same_step")
    assert env.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    env.reset()
    _, _, _, _, info = env.step(np.array([1, 1]))
    assert not info["_final_obs"].any()
    _, _, term, _, info = env.step(np.array([1, 1]))
    assert term.all() and info["_final_obs"].all() and info["final_obs"][:, 1].tolist() == [2.0, 2.0]
    env.close()


def test_adapter_rejects_async_pools():
    with pytest.raises(ValueError, match="needs a sync pool"):
        rlfast.GymnasiumVectorEnv(rlfast.make("CartPole-v1", num_envs=4, batch_size=2))


def test_reset_mask_resets_only_the_masked_envs_like_gymnasium():
    # gymnasium's semantics: masked envs reset (env i seeded with seed + i), the others untouched.
    env = rlfast.make_gymnasium("CartPole-v1", num_envs=3)
    obs, _ = env.reset(seed=5)
    actions = np.array([0, 1, 1])
    for _ in range(4):
        obs, *_ = env.step(actions)
    mask = np.array([True, False, True])
    got, info = env.reset(seed=11, options={"reset_mask": mask})
    fresh = rlfast.make_gymnasium("CartPole-v1", num_envs=3)
    want, _ = fresh.reset(seed=11)
    fresh.close()
    np.testing.assert_array_equal(got[1], obs[1])  # left alone: its current observation again
    np.testing.assert_array_equal(got[mask], want[mask])  # the episodes seed + i starts
    assert info["elapsed_step"].tolist() == [0, 4, 0]
    # Env 1 carries on from where it was: its next step is its fifth.
    _, _, _, _, info = env.step(actions)
    assert info["elapsed_step"].tolist() == [1, 5, 1]
    env.close()


@pytest.mark.parametrize(
    "options,match",
    [
        ({"reset_mask": np.array([True, False])}, r"reset_mask must be a bool array of shape \(3,\)"),
        ({"reset_mask": np.array([1, 0, 1])}, r"reset_mask must be a bool array"),
        ({"reset_mask": np.zeros(3, dtype=bool)}, "reset_mask selects no env"),
        ({"difficulty": 2}, r"no reset options besides reset_mask, got \['difficulty'\]"),
    ],
)
def test_bad_reset_options(options, match):
    env = rlfast.make_gymnasium("CartPole-v1", num_envs=3)
    env.reset()
    with pytest.raises(ValueError, match=match):
        env.reset(options=options)
    env.close()


def test_a_gymnasium_id_in_module_form_runs_in_worker_processes():
    env = rlfast.make_gymnasium("gymnasium:CartPole-v1", num_envs=2, seed=3)
    try:
        obs, _ = env.reset(seed=3)
        assert obs.shape == (2, 4) and obs.dtype == np.float32
        obs, reward, terminated, truncated, _ = env.step(np.zeros(2, np.int64))
        assert obs.shape == (2, 4) and reward.tolist() == [1.0, 1.0] and not terminated.any()
    finally:
        env.close()
