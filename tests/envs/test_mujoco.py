"""MuJoCo v5 tasks against gymnasium: spaces, seeding, reset noise, state-synced step equality,
bad input and simulator instability."""

import gymnasium as gym
import numpy as np
import pytest
import torch

import rlfast
from rlfast import EnvError, _C

TASKS = [
    "Ant-v5",
    "HalfCheetah-v5",
    "Hopper-v5",
    "Walker2d-v5",
    "Humanoid-v5",
    "HumanoidStandup-v5",
    "Swimmer-v5",
    "InvertedPendulum-v5",
    "InvertedDoublePendulum-v5",
    "Reacher-v5",
    "Pusher-v5",
]

# Both sides run the same libmujoco on the same (qpos, qvel, warm start) and the same float32
# actions, so the simulated state is bit-identical (measured: max |obs diff| = 0 over 300
# steps for every task). The only non-MuJoCo arithmetic in an observation is clipping and,
# for InvertedDoublePendulum / Reacher, sin/cos, where libm and NumPy may differ by one ulp:
# 1e-12 relative covers that and nothing more.
OBS_RTOL = 1e-12
OBS_ATOL = 1e-12
# Our reward is float32 (the pool's reward dtype), gymnasium's float64: one float32 rounding
# is 6e-8 relative. gymnasium also computes ctrl costs of float32 actions in float32 (NumPy 2
# promotion) with pairwise summation, ours sequentially: a few float32 ulps of that term.
REWARD_RTOL = 1e-6
REWARD_ATOL = 1e-6
# Info reward terms are float64 on both sides; the float32 ctrl costs differ as above.
INFO_RTOL = 1e-6
INFO_ATOL = 1e-9
# Shorter than the registered 1000 so that truncation is exercised within the test; Reacher
# (50) and Pusher (100) keep their registered limits.
ALIGN_STEPS = 300
ALIGN_LIMIT = 150


@pytest.fixture(autouse=True)
def _mujoco_log_in_tmp(tmp_path, monkeypatch):
    """MuJoCo appends its warnings (e.g. humanoid.xml's deprecated settotalmass) to
    MUJOCO_LOG.TXT in the working directory; keep that out of the checkout."""
    monkeypatch.chdir(tmp_path)


needs_hooks = pytest.mark.skipif(not _C.has_test_hooks, reason="built without RLFAST_TEST_HOOKS")


def random_actions(space, n, rng):
    return rng.uniform(space.low, space.high, size=(n, *space.shape)).astype(np.float32)


def sync_gym_from_pool(ref, pool, env_id=0):
    """Copies our (qpos, qvel, qacc_warmstart) into gymnasium's env (set_state runs mj_forward)."""
    u = ref.unwrapped
    nq, nv = u.model.nq, u.model.nv
    state = np.asarray(pool._get_state(env_id), dtype=np.float64)
    u.data.qacc_warmstart[:] = state[nq + nv :]
    u.set_state(state[:nq], state[nq : nq + nv])


@pytest.mark.wheel
@pytest.mark.parametrize("task_id", TASKS)
def test_spaces_and_info_keys_equal_gymnasium(task_id):
    ref = gym.make(task_id)
    ref.reset(seed=0)
    _, _, _, _, ref_info = ref.step(ref.action_space.sample())
    with rlfast.make(task_id, num_envs=2) as pool:
        assert pool.single_observation_space == ref.observation_space
        assert pool.single_action_space == ref.action_space
        assert pool.max_episode_steps == ref.spec.max_episode_steps
        _, info = pool.reset()
        assert set(ref_info) <= set(info), set(ref_info) - set(info)
        for key, value in ref_info.items():
            assert info[key].dtype == torch.float64
            assert tuple(info[key].shape[1:]) == np.shape(value), key
    ref.close()


@pytest.mark.wheel
@pytest.mark.parametrize("task_id", ["Ant-v5", "Hopper-v5", "Reacher-v5", "Pusher-v5"])
def test_same_seed_same_rollout_across_threads_other_seed_differs(task_id):
    def rollout(seed, num_threads):
        rng = np.random.default_rng(0)
        with rlfast.make(task_id, num_envs=4, num_threads=num_threads, seed=seed) as pool:
            obs, _ = pool.reset()
            out = [obs.clone()]
            for _ in range(30):
                obs, reward, *_ = pool.step(random_actions(pool.single_action_space, 4, rng))
                out += [obs.clone(), reward.double()]
        return torch.cat([o.flatten() for o in out])

    base = rollout(1, 1)
    assert torch.equal(base, rollout(1, 2))
    assert not torch.equal(base, rollout(2, 1))


@needs_hooks
@pytest.mark.parametrize(
    "task_id, noise, kind",
    [
        ("Ant-v5", 0.1, "normal"),
        ("HalfCheetah-v5", 0.1, "normal"),
        ("Hopper-v5", 5e-3, "uniform"),
        ("Humanoid-v5", 1e-2, "uniform"),
        ("InvertedDoublePendulum-v5", 0.1, "normal"),
    ],
)
def test_reset_noise_has_gymnasium_distribution(task_id, noise, kind):
    """qpos = qpos0 + U(-s, s); qvel = U(-s, s) or s * N(0, 1) per task, as gymnasium."""
    u = gym.make(task_id).unwrapped
    nq = u.model.nq
    with rlfast.make(task_id, num_envs=64, seed=5) as pool:
        pool.reset()
        states = np.array([pool._get_state(i) for i in range(64)])
    dq = states[:, :nq] - u.init_qpos
    qvel = states[:, nq : nq + u.model.nv]
    assert np.abs(dq).max() <= noise and np.abs(dq).max() > 0.9 * noise
    assert np.std(dq) == pytest.approx(noise / np.sqrt(3), rel=0.15)
    if kind == "uniform":
        assert np.abs(qvel).max() <= noise and np.std(qvel) == pytest.approx(noise / np.sqrt(3), rel=0.15)
    else:
        assert np.abs(qvel).max() > 2 * noise and np.std(qvel) == pytest.approx(noise, rel=0.15)


def check_info(info, ref_info, where):
    for key, value in ref_info.items():
        np.testing.assert_allclose(
            info[key][0].numpy(),
            np.asarray(value, dtype=np.float64),
            rtol=INFO_RTOL,
            atol=INFO_ATOL,
            err_msg=f"{where} info[{key!r}]",
        )


def run_aligned(task_id, kwargs, steps, seed):
    limit = None if task_id in ("Reacher-v5", "Pusher-v5") else ALIGN_LIMIT
    ref = gym.make(task_id, max_episode_steps=limit, **kwargs)
    ref.reset(seed=seed)
    rng = np.random.default_rng(seed)
    episodes = 0
    with rlfast.make(task_id, num_envs=1, seed=seed, max_episode_steps=limit, **kwargs) as pool:
        pool.reset()
        sync_gym_from_pool(ref, pool)
        for t in range(steps):
            where = f"{task_id} {kwargs} step {t}"
            # Actions up to 1.5x the bounds: both sides hand them to MuJoCo unclipped.
            action = 1.5 * random_actions(pool.single_action_space, 1, rng)
            obs, reward, term, trunc, info = pool.step(action)
            r_obs, r_reward, r_term, r_trunc, r_info = ref.step(action[0])
            np.testing.assert_allclose(obs[0].numpy(), r_obs, rtol=OBS_RTOL, atol=OBS_ATOL, err_msg=where)
            assert reward[0].item() == pytest.approx(r_reward, rel=REWARD_RTOL, abs=REWARD_ATOL), where
            assert (bool(term[0]), bool(trunc[0])) == (r_term, r_trunc), where
            check_info(info, r_info, where)
            if r_term or r_trunc:
                episodes += 1
                obs, reward, term, trunc, info = pool.step(action)  # next-step autoreset
                assert reward[0] == 0 and not term[0] and info["elapsed_step"][0] == 0, where
                ref.reset()
                sync_gym_from_pool(ref, pool)
    ref.close()
    return episodes


@pytest.mark.wheel
@needs_hooks
@pytest.mark.parametrize("task_id", TASKS)
def test_state_synced_steps_match_gymnasium(task_id):
    """No per-step re-sync: after syncing the state once per episode, both run free."""
    episodes = run_aligned(task_id, {}, ALIGN_STEPS, seed=0)
    assert episodes >= 1  # termination or truncation was compared at least once


@needs_hooks
@pytest.mark.parametrize(
    "task_id, kwargs",
    [
        (
            "Ant-v5",
            {
                "exclude_current_positions_from_observation": False,
                "include_cfrc_ext_in_observation": False,
                "ctrl_cost_weight": 0.1,
                "healthy_z_range": (0.3, 0.9),
                "contact_force_range": (-0.5, 0.5),
            },
        ),
        (
            "Hopper-v5",
            {
                "terminate_when_unhealthy": False,
                "healthy_angle_range": (-0.1, 0.1),
                "frame_skip": 2,
                "reset_noise_scale": 0.1,
            },
        ),
        (
            "Humanoid-v5",
            {
                "include_cinert_in_observation": False,
                "include_cvel_in_observation": False,
                "contact_cost_weight": 1e-6,
                "forward_reward_weight": 2.0,
            },
        ),
        ("HumanoidStandup-v5", {"include_qfrc_actuator_in_observation": False, "impact_cost_range": (-1.0, 0.1)}),
        ("Walker2d-v5", {"xml_file": "walker2d.xml", "healthy_z_range": (0.5, 2.5)}),
        ("Swimmer-v5", {"exclude_current_positions_from_observation": False}),
        ("InvertedDoublePendulum-v5", {"healthy_reward": 3.0}),
        ("Reacher-v5", {"reward_dist_weight": 0.3, "reward_control_weight": 2.0}),
    ],
)
def test_v5_options_match_gymnasium(task_id, kwargs):
    run_aligned(task_id, kwargs, 120, seed=3)


def test_ant_without_contact_forces_observed_plays_the_same_task():
    # configs/ant_cpu.toml leaves the 78 contact-force values out of Ant-v5's observation: the rewards (contact
    # cost included) and the other 27 values stay those of the default task, step for step
    full = rlfast.make("Ant-v5", 4, seed=3)
    lean = rlfast.make("Ant-v5", 4, seed=3, include_cfrc_ext_in_observation=False)
    a, b = full.reset()[0], lean.reset()[0]
    assert a.shape == (4, 105) and b.shape == (4, 27) and torch.equal(a[:, :27], b)
    gen = torch.Generator().manual_seed(0)
    for _ in range(300):
        action = torch.rand(4, 8, generator=gen) * 2 - 1
        (a, ra, ta, *_), (b, rb, tb, *_) = full.step(action), lean.step(action)
        assert torch.equal(ra, rb) and torch.equal(ta, tb) and torch.equal(a[:, :27], b)
    full.close()
    lean.close()


def test_wrong_action_shape_and_nan_are_rejected():
    with rlfast.make("Ant-v5", num_envs=2) as pool:
        pool.reset()
        with pytest.raises(ValueError, match=r"continuous actions must have shape \(n, 8\), got \(2, 7\)"):
            pool.send(np.zeros((2, 7), dtype=np.float32))
        with pytest.raises(ValueError, match=r"action for env 1 \(row 1, element 3\) is inf"):
            a = np.zeros((2, 8), dtype=np.float32)
            a[1, 3] = np.inf
            pool.send(a)
        obs, *_ = pool.step(np.zeros((2, 8), dtype=np.float32))  # the pool is still usable
        assert torch.isfinite(obs).all()


def test_bad_options_are_rejected():
    with pytest.raises(ValueError, match="unknown option 'ctrl_cost' for Ant-v5"):
        rlfast.make("Ant-v5", num_envs=1, ctrl_cost=0.1)
    with pytest.raises(OSError, match="does not exist"):
        rlfast.make("Ant-v5", num_envs=1, xml_file="no_such_model.xml")
    with pytest.raises(ValueError, match="frame_skip must be >= 1"):
        rlfast.make("Hopper-v5", num_envs=1, frame_skip=0)
    with pytest.raises(ValueError, match="main_body 99"):
        rlfast.make("Ant-v5", num_envs=1, main_body=99)


@needs_hooks
def test_simulator_instability_raises_env_error_then_resets():
    """MuJoCo silently resets a simulation that meets NaN/Inf/huge values; we raise instead."""
    with rlfast.make("Hopper-v5", num_envs=2, seed=0) as pool:
        pool.reset()
        state = pool._get_state(1)
        nq = 6
        state[nq] = 1e12  # qvel beyond MuJoCo's mjMAXVAL
        pool._set_state(1, state)
        with pytest.raises(EnvError, match=r"Hopper-v5 env 1 raised: MuJoCo simulation became unstable.*qvel"):
            pool.step(np.zeros((2, 3), dtype=np.float32))
        obs, reward, term, trunc, info = pool.step(np.zeros((2, 3), dtype=np.float32))
        assert info["elapsed_step"].tolist() == [2, 0]  # env 0 kept going, env 1 was reset
        assert torch.isfinite(obs).all()


@pytest.mark.wheel
def test_linked_mujoco_matches_headers():
    assert _C.mujoco_version_mismatch() == ""


def test_async_pool_steps_every_env():
    with rlfast.make("HalfCheetah-v5", num_envs=6, batch_size=2, num_threads=2, seed=0) as pool:
        pool.async_reset()
        seen = set()
        rng = np.random.default_rng(0)
        for _ in range(30):
            obs, reward, term, trunc, info = pool.recv()
            assert obs.shape == (2, 17) and torch.isfinite(obs).all()
            seen.update(info["env_id"].tolist())
            pool.send(random_actions(pool.single_action_space, 2, rng), info["env_id"])
        assert seen == set(range(6))


def test_xml_file_resolves_like_gymnasium(tmp_path):
    from rlfast import _mujoco

    defaults = {"xml_file": "ant.xml"}
    ref = gym.make("Ant-v5").unwrapped
    assert _mujoco.resolve_xml_file(defaults, {})["xml_file"] == ref.fullpath
    # A path starting with "." is taken relative to the working directory (tmp_path here).
    (tmp_path / "my_ant.xml").write_text(open(ref.fullpath).read())
    assert _mujoco.resolve_xml_file(defaults, {"xml_file": "./my_ant.xml"})["xml_file"] == str(tmp_path / "my_ant.xml")
    with rlfast.make("Ant-v5", num_envs=1, xml_file=str(tmp_path / "my_ant.xml")) as pool:
        assert pool.single_observation_space.shape == (105,)
    with pytest.raises(ValueError, match="xml_file must be a str"):
        _mujoco.resolve_xml_file(defaults, {"xml_file": 3})


# Run in a fresh interpreter: the timer is process-global, and other tests import mujoco.
_TIMER_PROBE = r"""
import ctypes, glob, os, sys
import torch
import rlfast
import mujoco

lib = ctypes.CDLL(glob.glob(os.path.join(mujoco.__path__[0], "libmujoco.so.*"))[0])
timer = ctypes.c_void_p.in_dll(lib, "mjcb_time")
seen = {"default": timer.value is not None and mujoco.get_mjcb_time() is None}
pool = rlfast.make("Ant-v5", 2, num_threads=1, seed=0)
pool.reset()
action = torch.zeros(2, 8)
mujoco.set_mjcb_time(None)  # the bindings' way back to their default timer
pool.step(action)
seen["default_after_step"] = timer.value
mujoco.set_mjcb_time(lambda: 0.0)
seen["python_set"] = timer.value is not None
pool.step(action)
seen["python_after_step"] = timer.value
libc_clock = ctypes.cast(ctypes.CDLL(None).clock, ctypes.c_void_p).value
timer.value = libc_clock
pool.reset()
pool.step(action)
seen["foreign_kept"] = timer.value == libc_clock
timer.value = None
pool.close()
print(seen)
"""


@pytest.mark.wheel
def test_mujoco_bindings_timer_is_switched_off_in_workers():
    """`import mujoco` installs a profiling timer in libmujoco's global mjcb_time, which made
    every rlfast MuJoCo step read the clock per pipeline stage (~8% of an Ant step); the
    workers drop the bindings' timers (default or Python callable) and keep a native one."""
    import ast
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", _TIMER_PROBE], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    seen = ast.literal_eval(proc.stdout.strip().splitlines()[-1])
    assert seen == {
        "default": True,
        "default_after_step": None,
        "python_set": True,
        "python_after_step": None,
        "foreign_kept": True,
    }
