"""Faults of Python envs' worker processes (rlfast/procpool.py): a worker killed, segfaulting, exiting or hanging
is one EnvError at recv naming it, in sync and async mode at any batch size; its envs go on in a new worker."""

import ctypes
import faulthandler
import os
import random
import re
import signal
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

import rlfast

FAULTS = ("sigkill", "sigsegv", "exit")
"""how a worker ends: SIGKILLed from outside, a segfault inside the env's step, os._exit(3) inside it"""
HOW = {"sigkill": r"was killed by signal 9 \(SIGKILL\)", "sigsegv": r"was killed by signal 11 \(SIGSEGV\)",
       "exit": "exited with status 3"}  # fmt: skip


class Faulty(gym.Env):
    """obs = [tag, steps in episode]; ends after 50 steps. Action 1 segfaults, 2 exits with status 3, 3 sleeps
    30 s, 4 raises; 0 steps. With ``broken`` (a file), a new instance raises in its constructor while it exists."""

    def __init__(self, tag: int = 0, broken: str = "") -> None:
        if broken and Path(broken).exists():
            raise RuntimeError(f"Faulty {tag} cannot be built: {broken} exists")
        self.observation_space = gym.spaces.Box(-1e9, 1e9, (2,), np.float64)
        self.action_space = gym.spaces.Discrete(5)
        self.tag, self.t = tag, 0

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([self.tag, 0], np.float64), {}

    def step(self, action):
        if action == 1:
            faulthandler.disable()  # pytest's, inherited by the worker: no traceback dump in the test's output
            ctypes.string_at(0)  # a segfault in the env's own code
        elif action == 2:
            os._exit(3)
        elif action == 3:
            time.sleep(30)
        elif action == 4:
            raise RuntimeError(f"Faulty {self.tag} raised in step")
        self.t += 1
        return np.array([self.tag, self.t], np.float64), 1.0, self.t >= 50, False, {}


def faulty_pool(num_envs: int, broken: str = "", **kwargs) -> rlfast.EnvPool:
    kwargs_per_env = [{"tag": i, "broken": broken} for i in range(num_envs)]
    return rlfast.make_from(Faulty, num_envs, env_kwargs_per_env=kwargs_per_env, **kwargs)


def kill(pid: int) -> None:
    """SIGKILLs a worker and waits until it has died (a zombie: the kernel takes some milliseconds), so that the
    next recv is the one that must report it."""
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None and time.monotonic() < deadline:
        time.sleep(0.001)


def injure(pool, worker: int, fault: str) -> int:
    """Ends ``worker`` the ``fault`` way: SIGKILL now; else the action that makes one of its envs end it."""
    if fault == "sigkill":
        kill(pool._procs[worker][0].pid)
    return {"sigkill": 0, "sigsegv": 1, "exit": 2}[fault]


def once(env: int, action: int):
    """The actions of ``drive``: ``action`` for ``env`` the first time it is sent to, 0 for every other."""
    left = [1]

    def actions(ids: torch.Tensor) -> np.ndarray:
        out = np.zeros(len(ids), np.int64)
        where = (ids == env).nonzero().flatten().tolist()
        if where and left[0]:
            out[where[0]], left[0] = action, 0
        return out

    return actions


def drive(pool, rounds: int, actions=None) -> tuple[dict, list]:
    """``rounds`` recv + send rounds (an async pool already reset); per env, its results; the EnvErrors met,
    each with the ``round`` it came in (their idle envs are sent to at once, as a training loop that goes on
    would)."""
    seen, errors = {e: 0 for e in range(pool.num_envs)}, []
    for r in range(rounds):
        try:
            _, _, _, _, info = pool.recv()
        except rlfast.EnvError as err:
            err.round = r
            errors.append(err)
            if len(err.env_ids):
                pool.send(np.zeros(len(err.env_ids), np.int64), err.env_ids)
            continue
        ids = info["env_id"]
        for e in ids.tolist():
            seen[e] += 1
        pool.send(np.zeros(len(ids), np.int64) if actions is None else actions(ids), ids)
    return seen, errors


def every_env_answers(pool, times: int = 3, seconds: float = 20.0) -> dict:
    """Drives ``pool`` until each env has returned ``times`` results (no env silently gone) and returns the
    counts; fails after ``seconds``. By rounds, not a fixed number of them: async batches are filled by whichever
    worker answers first, and on a loaded machine one worker can fill hundreds in a row (1.5 ms for 100 rounds
    while the other waits for a core)."""
    deadline, total = time.monotonic() + seconds, {e: 0 for e in range(pool.num_envs)}
    while min(total.values()) < times and time.monotonic() < deadline:
        seen, errors = drive(pool, 20)
        assert not errors, [str(e) for e in errors]
        total = {e: total[e] + seen[e] for e in total}
    assert min(total.values()) >= times, total
    return total


@pytest.mark.parametrize("fault", FAULTS)
@pytest.mark.parametrize("batch_size", [2, 3, 4])
def test_a_worker_that_dies_is_one_error_naming_it_then_its_envs_go_on(fault, batch_size):
    """4 envs in 2 workers, batches of 2 (async: the other worker alone fills them), 3 and 4 (sync)."""
    with faulty_pool(4, batch_size=batch_size, num_workers=2) as pool:
        pool.async_reset()
        drive(pool, 20)
        victim = pool._procs[1][0].pid
        action = injure(pool, 1, fault)
        start, actions, errors, first = time.monotonic(), once(2, action), [], True
        while not errors and time.monotonic() - start < 20:  # until env 2 is sent its action (async: its turn comes
            seen, errors = drive(pool, 50, actions=actions)  # when its worker answers first, however long that takes)
            if fault == "sigkill" and first:  # dead before this recv (kill waits for it), with envs in flight
                assert errors and errors[0].round == 0, [str(e) for e in errors]
            first = False
        assert len(errors) == 1, [str(e) for e in errors]
        message = str(errors[0])
        assert f"worker process 1 (pid {victim}), which runs envs 2-3, " in message
        assert re.search(HOW[fault], message), message
        assert f"Worker 1 restarted (pid {pool._procs[1][0].pid})" in message and pool._procs[1][0].pid != victim
        assert set(errors[0].env_ids.tolist()) <= {2, 3}
        if fault != "sigkill":  # env 2 was in flight when it ended its worker
            assert 2 in errors[0].env_ids.tolist()
        every_env_answers(pool)


def test_envs_of_a_restarted_worker_start_with_a_reset_seeded_anew():
    with faulty_pool(4, num_workers=2, seed=100) as pool:
        pool.reset()
        pool.step(np.zeros(4, np.int64))
        with pytest.raises(rlfast.EnvError, match="exited with status 3") as err:
            pool.step(np.array([0, 0, 2, 0]))
        assert sorted(err.value.env_ids.tolist()) == [2, 3]  # both in flight, now idle: the batch waits for them
        pool.send(np.zeros(2, np.int64), err.value.env_ids)
        obs, reward, terminated, truncated, info = pool.recv()  # envs 0, 1 stepped; 2, 3 reset in the new worker
        np.testing.assert_array_equal(info["elapsed_step"].numpy(), [2, 2, 0, 0])
        np.testing.assert_array_equal(obs[:, 1].numpy(), [2, 2, 0, 0])
        obs, *_ = pool.step(np.zeros(4, np.int64))
        np.testing.assert_array_equal(obs[:, 1].numpy(), [3, 3, 1, 1])


def test_a_step_past_the_step_timeout_kills_its_worker_and_names_the_env():
    # 3 s: well past a busy machine's scheduling delays (at 0.5 s a loaded 2-core machine once saw the worker that
    # did not hang wait that long for a core, and killed it too), well short of the hanging step's 30 s.
    with faulty_pool(4, num_workers=2, batch_size=2, step_timeout=3.0) as pool:
        pool.async_reset()
        drive(pool, 10)
        start, hang, errors = time.monotonic(), once(3, 3), []
        while not errors and time.monotonic() - start < 25:  # env 0-2's rounds go on meanwhile
            seen, errors = drive(pool, 50, actions=hang)
        assert len(errors) == 1 and 3.0 < time.monotonic() - start < 25
        message = str(errors[0])
        assert "ran env 3's step for more than the step timeout (3" in message and "(SIGKILL)" in message, message
        assert 3 in errors[0].env_ids.tolist()
    with pytest.raises(ValueError, match="step_timeout must be a number of seconds > 0"):
        faulty_pool(2, step_timeout=0)


def test_a_worker_that_cannot_be_rebuilt_closes_the_pool_with_both_reasons(tmp_path):
    broken = tmp_path / "broken"
    with faulty_pool(4, num_workers=2, broken=str(broken)) as pool:
        pool.reset()
        procs = [proc for proc, _ in pool._procs]
        broken.touch()  # from now on the envs' constructor raises
        with pytest.raises(rlfast.EnvError, match=r"(?s)exited with status 3.*Restarting worker 1 failed, so the "
                                                   r"pool is closed: .*Faulty 2 cannot be built") as err:  # fmt: skip
            pool.step(np.array([0, 0, 2, 0]))
        assert pool.closed and sorted(err.value.env_ids.tolist()) == [2, 3]
        with pytest.raises(rlfast.PoolStateError, match="closed"):
            pool.step(np.zeros(4, np.int64))
    assert len(procs) == 2 and not any(proc.is_alive() for proc in procs)


def test_a_constructor_or_reset_that_raises_is_an_error_naming_it(tmp_path):
    broken = tmp_path / "broken"
    broken.touch()
    with pytest.raises(RuntimeError, match=r"(?s)env worker process 0 failed to build its envs:.*Faulty 0 cannot"):
        faulty_pool(2, broken=str(broken))

    class ResetRaises(Faulty):
        def reset(self, *, seed=None, options=None):
            raise RuntimeError(f"Faulty {self.tag} raised in reset")

    with rlfast.make_from(ResetRaises, 2) as pool:
        with pytest.raises(rlfast.EnvError, match=r"(?s)env 0 raised: .*Faulty 0 raised in reset"):
            pool.reset()


def test_workers_killed_at_random_moments_each_make_one_error_and_no_env_is_lost():
    """20 SIGKILLs of a random worker after a random number of rounds, async batches of 3 of 8 envs."""
    rng = random.Random(0)
    with faulty_pool(8, num_workers=2, batch_size=3) as pool:
        pool.async_reset()
        for round_ in range(20):
            seen, errors = drive(pool, rng.randrange(0, 30))
            assert not errors
            worker = rng.randrange(2)
            victim = pool._procs[worker][0].pid
            kill(victim)
            seen, errors = drive(pool, 1)
            assert len(errors) == 1 and f"(pid {victim})" in str(errors[0]), (round_, [str(e) for e in errors])
            assert errors[0].round == 0  # the first recv after the death: every env is in flight here
            every_env_answers(pool, times=1)
        assert len({proc.pid for proc, _ in pool._procs}) == 2 and all(p.is_alive() for p, _ in pool._procs)


def test_an_exception_in_step_is_still_an_env_error_with_its_traceback():
    with faulty_pool(4, num_workers=2) as pool:
        pool.reset()
        with pytest.raises(rlfast.EnvError, match=r"(?s)env 1 raised: .*Traceback.*Faulty 1 raised in step"):
            pool.step(np.array([0, 4, 0, 0]))
        obs, *_ = pool.step(np.zeros(4, np.int64))  # the batch was consumed; env 1 reset
        assert torch.equal(obs[:, 1], torch.tensor([2.0, 0.0, 2.0, 2.0], dtype=torch.float64))


def test_a_stopped_worker_that_takes_no_requests_is_caught_by_the_step_timeout():
    """SIGSTOP: the worker is not busy with any step, it just never answers; the timeout still finds it."""
    with faulty_pool(4, num_workers=2, batch_size=2, step_timeout=0.5) as pool:
        pool.async_reset()
        drive(pool, 10)
        victim = pool._procs[0][0].pid
        os.kill(victim, signal.SIGSTOP)
        start, errors = time.monotonic(), []
        while not errors and time.monotonic() - start < 20:
            seen, errors = drive(pool, 50)
        assert len(errors) == 1 and f"(pid {victim})" in str(errors[0]), [str(e) for e in errors]
        assert "for more than the step timeout (0.5" in str(errors[0]) and "(SIGKILL)" in str(errors[0])
        every_env_answers(pool)


def test_an_idle_worker_is_not_taken_for_hung_when_sent_to_after_a_long_pause():
    with faulty_pool(4, num_workers=2, step_timeout=0.3) as pool:
        pool.reset()
        pool.step(np.zeros(4, np.int64))
        time.sleep(1.0)  # no recv, so no look at the workers, for longer than the timeout
        for _ in range(20):
            pool.step(np.zeros(4, np.int64))  # no EnvError
