"""VizDoom with Sample Factory's preprocessing (rlfast/vizdoom.py) through the pool of Python envs: every scenario
makes, resets and steps; the observation's layout; the same seed gives the same frames; the settings taken from
Sample Factory (resize, action sets, measurements, rewards). Skipped without the vizdoom package (the vizdoom extra)."""

import gymnasium as gym
import numpy as np
import pytest
import torch

import rlfast

pytest.importorskip("vizdoom", reason="the vizdoom extra: pip install 'rlfast[vizdoom]'")
from rlfast import vizdoom as rv  # noqa: E402  (registers the ids)

SCENARIOS = ["DoomBasic-v0", "DoomDefendCenter-v0", "DoomHealthGathering-v0", "DoomHealthGatheringSupreme-v0",
             "DoomMyWayHome-v0", "DoomDeadlyCorridor-v0", "DoomDeathmatch-v0"]  # fmt: skip
"""the issue's list: each must be registered"""


def test_the_issue_scenarios_are_registered():
    assert sorted(SCENARIOS) == sorted(rv.SCENARIOS)
    for sid in SCENARIOS:
        assert gym.spec(sid).entry_point == "rlfast.vizdoom:DoomEnv"


@pytest.mark.parametrize("sid", SCENARIOS)
def test_each_scenario_makes_resets_and_steps_through_the_pool(sid):
    with rlfast.make(f"rlfast.vizdoom:{sid}", 3, batch_size=2, seed=1) as pool:
        space = pool.single_observation_space
        assert space == rv.DoomEnv(sid).observation_space
        assert list(space.spaces) == ["measurements", "obs"]
        pool.async_reset()
        for _ in range(20):
            obs, reward, terminated, truncated, info = pool.recv()
            assert obs["obs"].shape == (2, 3, 72, 128) and obs["obs"].dtype == torch.uint8
            assert obs["measurements"].shape == (2, 23) and obs["measurements"].dtype == torch.float32
            assert obs["obs"].float().mean() > 0 or (terminated | truncated).any()  # a screen (black only at an end)
            space_ok = [space["measurements"].contains(m) for m in obs["measurements"].numpy()]
            assert all(space_ok), obs["measurements"]
            actions = np.stack([pool.single_action_space.sample() for _ in range(2)])
            pool.send(actions if actions.ndim == 1 else actions.astype(np.float32), info["env_id"])  # MultiDiscrete


def frames(sid: str, seed: int, steps: int = 60) -> list:
    """A pool of 2 envs stepped with fixed actions: every screen and measurement it returned."""
    with rlfast.make(f"rlfast.vizdoom:{sid}", 2, seed=seed, num_threads=2) as pool:
        space = pool.single_action_space
        space.seed(0)
        obs, _ = pool.reset()
        out = [(obs["obs"].clone(), obs["measurements"].clone())]
        for _ in range(steps):
            obs, *_ = pool.step(np.stack([space.sample() for _ in range(2)]))
            out.append((obs["obs"].clone(), obs["measurements"].clone()))
    return out


@pytest.mark.parametrize("sid", ["DoomBasic-v0", "DoomHealthGatheringSupreme-v0"])
def test_the_same_seed_gives_the_same_frames_another_seed_others(sid):
    a, b, c = frames(sid, 5), frames(sid, 5), frames(sid, 6)
    assert all(torch.equal(x[0], y[0]) and torch.equal(x[1], y[1]) for x, y in zip(a, b))
    assert not all(torch.equal(x[0], y[0]) for x, y in zip(a, c))


def test_the_pool_returns_what_the_env_gives_in_one_process():
    """Step-for-step equality with the env run directly (same seeds, same actions; next-step autoreset: an env's
    step after its episode's end is a reset with reward 0): the pool adds nothing, the black last screen included."""
    sid, n = "DoomDefendCenter-v0", 2
    refs = [gym.make(sid) for _ in range(n)]
    with rlfast.make(f"rlfast.vizdoom:{sid}", n, seed=9, num_threads=1) as pool:
        obs, _ = pool.reset()
        ref = [e.reset(seed=9 + i)[0] for i, e in enumerate(refs)]
        done, ends = [False] * n, 0
        rng = np.random.default_rng(3)
        for _ in range(300):
            for key in ("obs", "measurements"):
                np.testing.assert_array_equal(obs[key].numpy(), np.stack([r[key] for r in ref]), err_msg=key)
            a = rng.integers(0, [3, 2], (n, 2))
            obs, reward, *_ = pool.step(a.astype(np.float32))  # MultiDiscrete actions go as float rows
            rewards = []
            for i, e in enumerate(refs):
                if done[i]:
                    ref[i], r, done[i] = e.reset()[0], 0.0, False
                else:
                    ref[i], r, terminated, truncated, _ = e.step(a[i])
                    done[i] = terminated or truncated
                    ends += done[i]
                rewards.append(r)
            np.testing.assert_array_equal(reward.numpy(), np.float32(rewards))
        assert ends >= 2
    for e in refs:
        e.close()


def test_the_resize_is_opencv_nearest_as_sample_factory_resizes():
    cv2 = pytest.importorskip("cv2")
    env = rv.DoomEnv("DoomDeathmatch-v0")
    env.reset(seed=0)
    for _ in range(10):
        obs, *_ = env.step(env.action_space.sample())
    full = env.game.get_state().screen_buffer  # [3, 120, 160]
    assert full.shape == (3, 120, 160)
    ref = cv2.resize(full.transpose(1, 2, 0), (128, 72), interpolation=cv2.INTER_NEAREST).transpose(2, 0, 1)
    np.testing.assert_array_equal(obs["obs"], ref)
    env.close()


def test_action_sets_are_sample_factory_s():
    """doom_utils.py DOOM_ENVS / action_space.py: flat Discrete(1 + k) one-hot with a no-op; Tuple heads; the
    Discretized(11, -10, 10) turn of doom_battle."""
    basic = rv.DoomEnv("DoomBasic-v0")
    assert basic.action_space == gym.spaces.Discrete(4)
    assert basic._table == [[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]]
    center = rv.DoomEnv("DoomDefendCenter-v0")  # (noop, turn left, turn right) x (noop, attack)
    assert center.action_space == gym.spaces.MultiDiscrete([3, 2])
    assert center._table[int(np.dot([2, 1], center._strides))] == [0, 1, 1]
    dm = rv.DoomEnv("DoomDeathmatch-v0")
    assert dm.action_space == gym.spaces.MultiDiscrete([3, 3, 2, 2, 11])
    assert [dm._table[int(np.dot([0, 0, 0, 0, i], dm._strides))][-1] for i in (0, 5, 10)] == [-10.0, 0.0, 10.0]
    assert dm._table[int(np.dot([1, 2, 1, 0, 5], dm._strides))] == [1, 0, 0, 1, 1, 0, 0.0]
    assert len(rv.DoomEnv("DoomHealthGathering-v0")._table) == 5


def test_measurements_follow_doom_additional_input():
    env = rv.DoomEnv("DoomDefendCenter-v0")
    obs, _ = env.reset(seed=0)
    m = obs["measurements"]
    health = env._value("HEALTH")
    ammo = env._value("SELECTED_WEAPON_AMMO")
    assert health > 0 and ammo > 0
    np.testing.assert_allclose(m[[1, 2, 6]], [min(ammo / 15, 5), health / 30, 0.2], rtol=1e-6)
    assert m[0] == round(env._value("SELECTED_WEAPON"))
    env.close()


def test_rewards_sample_factory_s_or_the_scenario_s_own():
    """Health gathering: Sample Factory's .cfg living reward (0.01 a tic) and its +1 when health rises, or the
    vizdoom package's living reward (1 a tic) alone."""
    for rewards, per_step in (("sample_factory", 0.04), ("vizdoom", 4.0)):
        env = rv.DoomEnv("DoomHealthGathering-v0", rewards=rewards)
        env.reset(seed=0)
        _, r, *_ = env.step(0)  # no-op: health does not rise on the first step
        assert r == pytest.approx(per_step)
        env.close()
    basic = rv.DoomEnv("DoomBasic-v0")  # living reward -1 a tic, scaled by 0.01 (RewardScalingWrapper)
    basic.reset(seed=0)
    assert basic.step(0)[1] == pytest.approx(-0.04)
    basic.close()


def test_appo_trains_a_multidiscrete_scenario_and_evaluates_it(run, tmp_path):
    """DefendCenter's MultiDiscrete([3, 2]) through convnet_simple's two heads: a short run and evaluate.py."""
    proc = run("appo.py", "--env-id", "rlfast.vizdoom:DoomDefendCenter-v0", "--num-envs", "4", "--trajectory-length",
               "8", "--batch-size", "64", "--total-timesteps", "256", "--torch-threads", "1", "--runs-dir", "runs",
               cwd=tmp_path, timeout=240)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    proc = run("evaluate.py", str(run_dir), "--episodes", "2", cwd=tmp_path, timeout=240)
    assert proc.returncode == 0 and "greedy policy" in proc.stdout, proc.stdout + proc.stderr
