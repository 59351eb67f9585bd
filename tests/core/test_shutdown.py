"""close(), del, Ctrl-C and interpreter exit never hang, whatever is in flight."""

import os
import signal
import threading
import time

import numpy as np
import pytest

import rlfast
from rlfast import PoolStateError


def slow_pool(**kw):
    # Each step sleeps 300 ms: long enough for a recv to be parked when we act.
    return rlfast.make("Dummy-v0", num_envs=4, **{"num_threads": 2, **kw}, step_sleep_us=300_000)


def close_during(pool, body, after):
    """Runs body() in a thread, closes the pool `after` seconds later; returns what body ended
    with ("returned" or the PoolStateError text) and how long close() + the thread took."""
    outcome = []

    def run():
        try:
            body()
            outcome.append("returned")
        except PoolStateError as e:
            outcome.append(str(e))

    t = threading.Thread(target=run)
    t.start()
    time.sleep(after)
    start = time.monotonic()
    pool.close()
    t.join(timeout=5)
    assert not t.is_alive(), "recv kept going after close()"
    return outcome, time.monotonic() - start


def test_close_from_another_thread_wakes_a_blocked_recv():
    slow = slow_pool()
    slow.async_reset()

    def blocked_recv():
        slow.recv()
        slow.send(np.zeros(4, dtype=np.int32))
        slow.recv()

    outcome, took = close_during(slow, blocked_recv, after=0.5)
    assert took < 3
    assert outcome and "closed" in outcome[0]


@pytest.mark.parametrize(
    "kwargs,limit",
    [
        # A recv parked on a 1.5 s step wakes for Ctrl-C at once.
        ({"num_envs": 2, "num_threads": 2, "step_sleep_us": 1_500_000}, 1.0),
        # work_in_recv with no workers: recv runs the four 200 ms resets itself; Ctrl-C lands
        # during the first and is raised after it, not after all four.
        ({"num_envs": 4, "num_threads": 0, "work_in_recv": True, "step_sleep_us": 200_000}, 0.7),
    ],
)
def test_ctrl_c_interrupts_recv_and_the_pool_survives(kwargs, limit, sigint_raises):
    pool = rlfast.make("Dummy-v0", **kwargs)
    pool.async_reset()
    timer = threading.Timer(0.1, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        pool.recv()
    assert time.monotonic() - start < limit, "Ctrl-C took too long to interrupt recv"
    obs = pool.recv()[0]  # the interrupted batch is still delivered later
    assert obs.shape == (kwargs["num_envs"], 3)
    pool.close()


@pytest.mark.parametrize("num_threads", [0, 1])
def test_close_from_another_thread_stops_a_recv_that_is_stepping_envs(num_threads):
    # work_in_recv: the recv thread is inside a 300 ms step when close() comes; it finishes
    # that step, then raises instead of taking more work or waiting.
    slow = slow_pool(num_threads=num_threads, work_in_recv=True)
    slow.async_reset()
    outcome, took = close_during(slow, slow.recv, after=0.45)
    assert took < 2
    assert outcome == ["the pool was closed while recv() was waiting"]


def test_close_with_steps_in_flight_returns_promptly():
    pool = slow_pool()
    pool.async_reset()
    start = time.monotonic()
    pool.close()
    assert time.monotonic() - start < 2.0


def test_del_and_gc_close_the_pool():
    pool = slow_pool()
    pool.async_reset()
    start = time.monotonic()
    del pool
    assert time.monotonic() - start < 2.0


@pytest.mark.parametrize("how", ["exit", "exception", "sys_exit_in_thread"])
def test_interpreter_exit_with_work_in_flight_does_not_hang(how, exits_promptly):
    body = {
        "exit": "pass",
        "exception": "raise SystemExit(3)",
        # The sleep lets the thread enter recv (a step takes 200 ms) before the interpreter exits.
        "sys_exit_in_thread": (
            "import threading, time; threading.Thread(target=p.recv, daemon=True).start(); time.sleep(0.05)"
        ),
    }[how]
    code = (
        "import rlfast\n"
        "p = rlfast.make('Dummy-v0', num_envs=4, batch_size=2, step_sleep_us=200000)\n"
        "q = rlfast.make('CartPole-v1', num_envs=8)\n"
        "p.async_reset(); q.async_reset()\n"
        f"{body}\n"
    )
    stderr = exits_promptly(code, timeout=120)
    assert "terminate called" not in stderr and "Fatal Python error" not in stderr
    if how == "exit":
        assert stderr == ""
    if how == "sys_exit_in_thread" and stderr:
        # A daemon thread blocked in recv gets a clean PoolStateError when atexit closes the pool.
        assert "PoolStateError: the pool was closed while recv() was waiting" in stderr, stderr
