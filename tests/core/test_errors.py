"""Bad input gets a clear Python exception naming the bad value; misuse never hangs."""

import numpy as np
import pytest
import torch

import rlfast
from rlfast import EnvError, PoolStateError


def test_unknown_task_suggests_close_names():
    with pytest.raises(ValueError, match=r"'CartPole-v0'.*did you mean 'CartPole-v1'"):
        rlfast.make("CartPole-v0", num_envs=2)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"num_envs": 0}, "num_envs must be >= 1, got 0"),
        ({"num_envs": 4, "batch_size": 5}, r"batch_size must be in \[1, num_envs=4\], got 5"),
        ({"num_envs": 4, "num_threads": 0}, r"num_threads must be >= 1 \(or 0 with work_in_recv=True\), got 0"),
        ({"num_envs": 4, "num_threads": -1, "work_in_recv": True}, "num_threads must be >= 0, got -1"),
        ({"num_envs": 2, "seeds": [1, 2, 3]}, "seeds must have one entry per env"),
        ({"num_envs": 2, "autoreset_mode": "sometimes"}, "autoreset_mode must be one of"),
        ({"num_envs": 2, "max_episode_steps": -3}, r"max_episode_steps must be >= 1 \(None: the env's default\)"),
        ({"num_envs": 2, "gravity": 3.0}, "unknown option 'gravity' for CartPole-v1.*sutton_barto_reward"),
        ({"num_envs": 2, "sutton_barto_reward": "yes"}, "option 'sutton_barto_reward' of CartPole-v1 got 'yes'"),
        ({"num_envs": 2.5}, "num_envs must be an int, got 2.5"),
    ],
)
def test_bad_make_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        rlfast.make("CartPole-v1", **kwargs)


@pytest.fixture
def pool():
    p = rlfast.make("CartPole-v1", num_envs=4, num_threads=2)
    p.reset()
    yield p
    p.close()


@pytest.mark.parametrize(
    "actions,match",
    [
        (np.zeros(3, dtype=np.int32), "got actions for 3 envs but sending to 4 envs"),
        (np.zeros((4, 2), dtype=np.int32), r"discrete actions must have shape"),
        (np.zeros(4, dtype=np.float32), "discrete actions must be integers, got dtype float32"),
        (np.array([0, 1, 2, 0]), r"actions\[2\] = 2 is out of range: CartPole-v1 has 2 actions \(0..1\)"),
        (np.array([0, -1, 0, 0]), r"actions\[1\] = -1 is out of range"),
        (np.array([True, False, True, False]), "actions has dtype bool"),
        (np.zeros(4, dtype=np.int16), "unsupported action dtype int16"),
    ],
)
def test_bad_actions(pool, actions, match):
    with pytest.raises(ValueError, match=match):
        pool.send(actions)
    pool.step(np.zeros(4, dtype=np.int32))  # a failed send changed nothing


@pytest.mark.parametrize(
    "env_ids,match",
    [
        (np.array([0, 1, 2, 4]), r"env_ids\[3\] = 4 is out of range for a pool of 4 envs"),
        (np.array([0, 1, -1, 3]), r"env_ids\[2\] = -1 is out of range"),
        (np.array([0, 1, 1, 3]), "env id 1 appears more than once in env_ids"),
        (np.array([[0, 1, 2, 3]]), "env_ids must be a 1-d array of integers"),
        (np.array([0.0, 1.0, 2.0, 3.0]), "env_ids must be a 1-d array of integers"),
    ],
)
def test_bad_env_ids(pool, env_ids, match):
    with pytest.raises(ValueError, match=match):
        pool.send(np.zeros(4, dtype=np.int32), env_ids)


def test_send_to_env_in_flight(pool):
    pool.send(np.zeros(2, dtype=np.int32), np.array([0, 1]))
    with pytest.raises(PoolStateError, match="env 1 is still in flight"):
        pool.send(np.zeros(1, dtype=np.int32), np.array([1]))
    pool.send(np.zeros(2, dtype=np.int32), np.array([2, 3]))
    obs, *_ = pool.recv()
    assert obs.shape == (4, 4)


def test_recv_with_nothing_in_flight_raises_instead_of_hanging(pool):
    with pytest.raises(PoolStateError, match="recv\\(\\) would wait forever: 0 env\\(s\\) in flight"):
        pool.recv()
    pool.send(np.zeros(2, dtype=np.int32), np.array([0, 1]))
    with pytest.raises(PoolStateError, match="2 env\\(s\\) in flight but batch_size is 4"):
        pool.recv()


def test_second_async_reset_raises(pool):
    pool.async_reset()
    with pytest.raises(PoolStateError, match="still in flight"):
        pool.async_reset()
    pool.recv()


def test_use_after_close(pool):
    pool.close()
    pool.close()  # idempotent
    assert pool.closed
    with pytest.raises(PoolStateError, match="closed"):
        pool.step(np.zeros(4, dtype=np.int32))
    with pytest.raises(PoolStateError, match="closed"):
        pool.recv()
    with pytest.raises(PoolStateError, match="closed"):
        pool.reset()


def test_env_exception_surfaces_at_recv_naming_the_env():
    with rlfast.make("Dummy-v0", num_envs=4, throw_on_action=13) as pool:
        pool.reset()
        with pytest.raises(EnvError, match=r"Dummy-v0 env 2 raised: Dummy-v0 was told to fail on action 13"):
            pool.step(np.array([1, 1, 13, 1]))
        # The pool keeps working; the failed env restarts with a reset.
        obs, reward, term, trunc, info = pool.step(np.array([1, 1, 1, 1]))
        assert obs[2, 1] == 0.0 and obs[0, 1] == 2.0


def test_env_exception_in_a_step_run_by_recv_itself_names_the_env():
    # num_threads=0: every step runs on this thread, inside recv (work_in_recv).
    with rlfast.make("Dummy-v0", num_envs=3, num_threads=0, work_in_recv=True, throw_on_action=13) as pool:
        pool.reset()
        with pytest.raises(EnvError, match=r"Dummy-v0 env 1 raised: Dummy-v0 was told to fail on action 13"):
            pool.step(np.array([1, 13, 1]))
        obs, reward, term, trunc, info = pool.step(np.array([1, 1, 1]))
        assert obs[1, 1] == 0.0 and obs[0, 1] == 2.0


def test_exception_in_async_mode_names_only_the_failing_env():
    with rlfast.make("Dummy-v0", num_envs=6, batch_size=2, throw_on_action=99) as pool:
        pool.async_reset()
        errors, victim = [], None
        for step in range(30):
            try:
                obs, reward, term, trunc, info = pool.recv()
                ids = info["env_id"].numpy().copy()
            except EnvError as e:
                errors.append(str(e))
                ids = e.env_ids.numpy()  # the consumed batch: idle again
                assert victim in ids.tolist()
            actions = np.zeros(len(ids), dtype=np.int32)
            if step == 5:
                victim, actions[0] = int(ids[0]), 99
            pool.send(actions, ids)
        assert len(errors) == 1 and f"Dummy-v0 env {victim} raised" in errors[0]


def test_nan_action_is_rejected_before_reaching_the_env():
    task = next((t for t in rlfast.list_envs() if t == "Pendulum-v1"), None)
    if task is None:
        pytest.skip("Pendulum-v1 not built")
    with rlfast.make(task, num_envs=2) as pool:
        pool.reset()
        with pytest.raises(ValueError, match=r"action for env 1 \(row 1, element 0\) is nan; actions must be finite"):
            pool.send(np.array([[0.0], [np.nan]], dtype=np.float32))
        with pytest.raises(ValueError, match="continuous actions must have shape \\(n, 1\\), got \\(2\\)"):
            pool.send(np.zeros(2, dtype=np.float32))
        pool.step(torch.zeros(2, 1))


def test_torch_and_list_actions_are_accepted():
    with rlfast.make("CartPole-v1", num_envs=3) as pool:
        pool.reset()
        pool.step(torch.tensor([0, 1, 0]))
        pool.step([1, 0, 1])
    with rlfast.make("Dummy-v0", num_envs=4, batch_size=2) as pool:
        pool.async_reset()
        pool.recv()
        pool.recv()
        pool.send(torch.tensor([5, 6]), env_ids=torch.tensor([3, 1]))
        obs, reward, term, trunc, info = pool.recv()
        got = dict(zip(info["env_id"].tolist(), reward.tolist()))
        assert got == {3: 5.0, 1: 6.0}
