"""Python envs in the pool (rlfast/procpool.py): the same semantics as C++ envs, checked against gymnasium."""

import os
import signal
import threading
import time
from functools import partial

import gymnasium as gym
import numpy as np
import pytest

import rlfast
from rlfast.procpool import ProcessEnvPool


class Echo(gym.Env):
    """obs = [tag, last action, steps in episode]; reward = the action; ends after ``length`` steps. On action
    ``fail`` it raises, on ``die`` its worker process exits, on ``hang`` it sleeps 30 s."""

    def __init__(self, tag: int = 0, length: int = 5, fail: int = 7, die: int = 8, hang: int = 9) -> None:
        self.observation_space = gym.spaces.Box(-1e9, 1e9, (3,), np.float64)
        self.action_space = gym.spaces.Discrete(10)
        self.tag, self.length, self.fail, self.die, self.hang = tag, length, fail, die, hang
        self.t = 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([self.tag, -1, 0], np.float64), {}

    def step(self, action):
        if action == self.fail:
            raise RuntimeError(f"Echo {self.tag} was told to fail")
        if action == self.die:
            os._exit(3)
        if action == self.hang:
            time.sleep(30)
        self.t += 1
        return np.array([self.tag, action, self.t], np.float64), float(action), self.t >= self.length, False, {}


def echo_pool(num_envs: int = 6, **kwargs) -> ProcessEnvPool:
    return rlfast.make_from(Echo, num_envs, env_kwargs_per_env=[{"tag": i} for i in range(num_envs)], **kwargs)


def test_gymnasium_id_matches_sync_vector_env_step_for_step():
    n = 6
    with rlfast.make("gymnasium:CartPole-v1", n, seed=11) as pool:
        assert isinstance(pool, ProcessEnvPool) and pool.num_workers == min(len(os.sched_getaffinity(0)), n)
        assert pool.single_observation_space == gym.make("CartPole-v1").observation_space
        ref = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(n)])
        obs, _ = pool.reset()
        ref_obs, _ = ref.reset(seed=[11 + i for i in range(n)])
        np.testing.assert_array_equal(obs.numpy(), ref_obs)
        rng = np.random.default_rng(0)
        ends = 0
        for _ in range(300):  # several episode ends: next-step autoreset on both sides
            a = rng.integers(0, 2, n)
            obs, r, term, trunc, info = pool.step(a)
            ref_obs, ref_r, ref_term, ref_trunc, _ = ref.step(a)
            np.testing.assert_array_equal(obs.numpy(), ref_obs)
            np.testing.assert_array_equal(r.numpy(), ref_r)
            np.testing.assert_array_equal(term.numpy(), ref_term)
            np.testing.assert_array_equal(trunc.numpy(), ref_trunc)
            ends += int(term.sum())
        assert ends > 5


@pytest.mark.parametrize("continuous", [False, True])
def test_box2d_lunar_lander_matches_sync_vector_env_step_for_step(continuous):
    """A heavier gymnasium env with Discrete or float Box actions: the same observations, rewards and ends."""
    pytest.importorskip("Box2D", reason="gymnasium's Box2D envs need the box2d package (the bench extra)")
    n = 4
    make = partial(gym.make, "LunarLander-v3", continuous=continuous)
    with rlfast.make_from(make, n, seed=5, num_workers=2) as pool:
        ref = gym.vector.SyncVectorEnv([make for _ in range(n)])
        obs, _ = pool.reset()
        ref_obs, _ = ref.reset(seed=[5 + i for i in range(n)])
        np.testing.assert_array_equal(obs.numpy(), ref_obs)
        ref.single_action_space.seed(0)
        ends = 0
        for _ in range(250):  # random landers crash within ~100 steps: several next-step autoresets
            a = np.stack([ref.single_action_space.sample() for _ in range(n)])
            obs, r, term, trunc, _ = pool.step(a)
            ref_obs, ref_r, ref_term, ref_trunc, _ = ref.step(a)
            np.testing.assert_array_equal(obs.numpy(), ref_obs)
            np.testing.assert_array_equal(r.numpy(), ref_r.astype(np.float32))
            np.testing.assert_array_equal(term.numpy(), ref_term)
            np.testing.assert_array_equal(trunc.numpy(), ref_trunc)
            ends += int(term.sum())
        assert ends >= n


def test_a_discrete_action_reaches_the_env_shifted_by_its_start():
    class Shifted(gym.Env):
        observation_space = gym.spaces.Box(-10, 10, (1,), np.float32)
        action_space = gym.spaces.Discrete(3, start=-1)

        def reset(self, *, seed=None, options=None):
            return np.zeros(1, np.float32), {}

        def step(self, action):
            assert self.action_space.contains(action), action
            return np.array([action], np.float32), 0.0, False, False, {}

    with rlfast.make_from(Shifted, 3, num_workers=2) as pool:
        pool.reset()
        obs, *_ = pool.step(np.array([0, 1, 2]))  # the pool's actions are indices 0..n-1
        np.testing.assert_array_equal(obs[:, 0].numpy(), [-1, 0, 1])


def test_each_action_reaches_its_env_in_async_batches():
    n, b = 6, 2
    with echo_pool(n, batch_size=b, num_workers=2) as pool:
        pool.async_reset()
        seen, sent = set(), {}
        # at least 60 batches, and on until every env has answered: a worker slow to start under load (other
        # tests' processes on the same cores) answers later, not never; 60 s bound that wait
        step, deadline = -1, time.monotonic() + 60
        while step < 59 or (seen != set(range(n)) and time.monotonic() < deadline):
            step += 1
            obs, reward, term, trunc, info = pool.recv()
            ids = info["env_id"].numpy().copy()
            assert ids.shape == (b,)
            np.testing.assert_array_equal(obs[:, 0].numpy(), ids)  # each result is its own env's
            for row, env in enumerate(ids):  # the echo of the action sent to that env (-1 after a reset)
                assert obs[row, 1].item() == (sent[env] if obs[row, 2].item() > 0 else -1)
            seen.update(ids.tolist())
            actions = (ids + step) % 5  # 0..4: no fail/die/hang
            sent.update(zip(ids.tolist(), actions.tolist()))
            pool.send(actions, info["env_id"])
        assert seen == set(range(n))


def test_episode_statistics_and_autoreset_modes():
    with echo_pool(2, seed=0) as pool:
        pool.reset()
        for t in range(1, 6):
            obs, reward, term, trunc, info = pool.step(np.array([2, 3]))
        assert term.all() and (info["episode_length"].numpy() == 5).all()
        np.testing.assert_array_equal(info["episode_return"].numpy(), [10.0, 15.0])
        obs, reward, term, *_ = pool.step(np.array([1, 1]))  # next-step autoreset: a reset, reward 0
        np.testing.assert_array_equal(obs[:, 2].numpy(), [0, 0])
        assert (reward.numpy() == 0).all() and not term.any()
    with echo_pool(2, autoreset_mode="same_step") as pool:
        pool.reset()
        for _ in range(5):
            obs, reward, term, trunc, info = pool.step(np.array([4, 4]))
        assert term.all()
        np.testing.assert_array_equal(info["final_obs"][:, 1:].numpy(), [[4, 5], [4, 5]])
        np.testing.assert_array_equal(obs[:, 1:].numpy(), [[-1, 0], [-1, 0]])


def test_max_episode_steps_truncates_in_both_autoreset_modes_and_peeks_step_nothing():
    with echo_pool(2, max_episode_steps=3) as pool:  # Echo ends by itself after 5 steps
        pool.reset()
        for _ in range(3):
            obs, reward, term, trunc, info = pool.step(np.array([2, 3]))
        assert trunc.all() and not term.any() and (info["episode_length"].numpy() == 3).all()
        np.testing.assert_array_equal(obs[:, 1:].numpy(), [[2, 3], [3, 3]])  # the last obs, reset on next send
        obs, reward, term, trunc, info = pool.step(np.array([1, 1]))
        np.testing.assert_array_equal(obs[:, 1:].numpy(), [[-1, 0], [-1, 0]])
        assert not trunc.any() and (info["elapsed_step"].numpy() == 0).all()
        obs, *_ = pool.step(np.array([4, 4]))
        pool._peek([0, 1])  # reports the current state again, steps nothing
        peek, reward, term, trunc, info = pool.recv()
        np.testing.assert_array_equal(peek.numpy(), obs.numpy())
        assert (reward.numpy() == 0).all() and (info["elapsed_step"].numpy() == 1).all()
    with echo_pool(2, max_episode_steps=3, autoreset_mode="same_step") as pool:
        pool.reset()
        for t in range(7):  # two truncations, each with the final obs in info and a fresh episode in obs
            obs, reward, term, trunc, info = pool.step(np.array([4, 4]))
            assert trunc.all() == (t % 3 == 2) and not term.any()
            if t % 3 == 2:
                np.testing.assert_array_equal(info["final_obs"][:, 1:].numpy(), [[4, 3], [4, 3]])
                np.testing.assert_array_equal(obs[:, 1:].numpy(), [[-1, 0], [-1, 0]])
                np.testing.assert_array_equal(info["episode_return"].numpy(), [12.0, 12.0])
            else:
                np.testing.assert_array_equal(obs[:, 1:].numpy(), [[4, t % 3 + 1], [4, t % 3 + 1]])


def test_env_exception_surfaces_at_recv_naming_the_env_then_it_resets():
    with echo_pool(4, num_workers=2) as pool:
        pool.reset()
        with pytest.raises(rlfast.EnvError, match=r"(?s)env 2 raised: .*Echo 2 was told to fail") as err:
            pool.step(np.array([1, 1, 7, 1]))
        assert "Traceback" in str(err.value)
        obs, reward, *_ = pool.step(np.array([1, 1, 1, 1]))  # env 2 reset, the others stepped
        np.testing.assert_array_equal(obs[:, 2].numpy(), [2, 2, 0, 2])


def test_a_dead_worker_is_an_error_naming_it_not_a_hang():
    """(tests/faults/test_worker_faults.py tries every way a worker can end, in sync and async mode.)"""
    with echo_pool(4, num_workers=2) as pool:
        pool.reset()
        start = time.monotonic()
        with pytest.raises(rlfast.EnvError, match=r"worker process 1 \(pid \d+\), which runs envs 2-3, exited with "
                                                   r"status 3\. .*Worker 1 restarted") as err:  # fmt: skip
            pool.step(np.array([1, 1, 8, 1]))
        assert time.monotonic() - start < 10
        pool.send(np.array([1, 1]), err.value.env_ids)  # the batch of envs 0 and 1 waits for these
        obs, *_ = pool.recv()
        np.testing.assert_array_equal(obs[:, 2].numpy(), [1, 1, 0, 0])  # 2 and 3 reset in the new worker


def test_close_while_an_env_hangs_returns_promptly():
    pool = echo_pool(2, batch_size=1, num_workers=2)
    pool.async_reset()
    pool.recv(), pool.recv()  # both resets
    pool.send(np.array([9]), np.array([0]))  # env 0 sleeps 30 s in its worker
    time.sleep(0.2)
    procs = [proc for proc, _ in pool._procs]
    start = time.monotonic()
    pool.close()
    assert time.monotonic() - start < 5
    assert len(procs) == 2 and not any(p.is_alive() for p in procs)  # joined, or killed when stuck
    pool.close()  # idempotent


def test_spaces_are_checked():
    class DictObs(Echo):
        def __init__(self):
            super().__init__()
            self.observation_space = gym.spaces.Dict({"a": gym.spaces.Discrete(2)})

    with pytest.raises(ValueError, match="FlattenObservation"):
        rlfast.make_from(DictObs, 2)
    with pytest.raises(ValueError, match="unknown task id 'NoSuchEnv-v9'"):
        rlfast.make("NoSuchEnv-v9", 2)
    with pytest.raises(ValueError, match="num_workers must be an int in \\[1, num_envs=2\\]"):
        rlfast.make_from(Echo, 2, num_workers=3)


def test_multidiscrete_actions_are_whole_numbers_in_range():
    class Multi(Echo):
        def __init__(self):
            super().__init__()
            self.action_space = gym.spaces.MultiDiscrete([3, 4], start=[1, 0])

        def step(self, action):
            assert action.dtype == np.int64
            return np.array([action[0], action[1], 0.0]), 0.0, False, False, {}

    with rlfast.make_from(Multi, 2) as pool:
        pool.reset()
        obs, *_ = pool.step(np.array([[1, 0], [3, 3]], np.float32))
        np.testing.assert_array_equal(obs[:, :2].numpy(), [[1, 0], [3, 3]])
        with pytest.raises(ValueError, match=r"element 0\) is 0; .* whole numbers in \[1, 3\]"):
            pool.step(np.array([[0, 0], [1, 1]], np.float32))
        with pytest.raises(ValueError, match=r"is 1.5"):
            pool.step(np.array([[1.5, 0], [1, 1]], np.float32))


def test_discrete_observations_and_seeds():
    with rlfast.make("gymnasium:FrozenLake-v1", 3, seed=5, is_slippery=True) as pool:
        assert pool.single_observation_space == gym.spaces.Discrete(16)
        obs, _ = pool.reset()
        assert obs.dtype.is_floating_point is False and obs.shape == (3,)
        rng = np.random.default_rng(1)
        actions = rng.integers(0, 4, (50, 3))
        first = [pool.step(a)[0].clone() for a in actions]
        pool.seed(5)
        pool.reset()
        again = [pool.step(a)[0].clone() for a in actions]
        for x, y in zip(first, again):
            np.testing.assert_array_equal(x.numpy(), y.numpy())


def test_ctrl_c_interrupts_recv_and_workers_survive_it(sigint_raises):
    with echo_pool(2, batch_size=1, num_workers=2) as pool:
        pool.async_reset()
        pool.recv(), pool.recv()  # both resets
        pool.send(np.array([9]), np.array([0]))  # env 0 hangs for 30 s
        pool.send(np.array([1]), np.array([1]))
        pool.recv()  # env 1's step
        timer = threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGINT))
        timer.start()
        start = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            pool.recv()  # waits for env 0
        assert time.monotonic() - start < 2
        # The workers ignore the terminal's SIGINT (the main process handles Ctrl-C): env 1's still steps.
        pool.send(np.array([2]), np.array([1]))
        obs, *_ = pool.recv()
        assert obs[0, 1].item() == 2


@pytest.mark.parametrize("body", ["pass", "raise SystemExit(3)"])
def test_interpreter_exit_with_python_envs_in_flight_does_not_hang(body, exits_promptly):
    code = (
        "import time, numpy as np, gymnasium as gym, rlfast\n"
        "class Slow(gym.Env):\n"
        "    observation_space = gym.spaces.Box(0, 1, (2,))\n"
        "    action_space = gym.spaces.Discrete(2)\n"
        "    def reset(self, *, seed=None, options=None): return np.zeros(2, np.float32), {}\n"
        "    def step(self, a): time.sleep(120); return np.zeros(2, np.float32), 0.0, False, False, {}\n"
        "p = rlfast.make_from(Slow, 4)\n"
        "p.reset(); p.send(np.zeros(4, np.int64))\n"
        f"{body}\n"
    )
    stderr = exits_promptly(code, timeout=110)  # not waiting for the step in flight (120 s)
    assert "Traceback" not in stderr and "leaked" not in stderr, stderr


def test_a_bare_gymnasium_id_is_refused_with_the_module_form_as_hint():
    with pytest.raises(ValueError, match=r"did you mean 'CartPole-v1'.*'gymnasium:CartPole-v0' runs it as Python envs"):
        rlfast.make("CartPole-v0", 2)


def test_make_takes_the_process_pools_num_workers_and_refuses_a_contradiction():
    pool = rlfast.make("gymnasium:CartPole-v1", 2, num_workers=1)
    try:
        assert pool.num_workers == 1
    finally:
        pool.close()
    with pytest.raises(ValueError, match=r"num_threads=2 and num_workers=1 both set"):
        rlfast.make("gymnasium:CartPole-v1", 2, num_threads=2, num_workers=1)
