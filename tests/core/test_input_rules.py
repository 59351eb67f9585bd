"""Issue 14's input rules: every bad argument is a ValueError (or PoolStateError) naming the
parameter and the value; make() refuses pools that cannot fit before allocating them; env
construction runs in parallel, without the GIL, and Ctrl-C stops it."""

import ctypes
import os
import signal
import threading
import time

import numpy as np
import pytest
import torch

import rlfast
from rlfast import FrameStack, PoolStateError

N = 3


@pytest.mark.parametrize(
    "kwargs,match",
    [
        ({"seed": None}, "seed must be an int, got None"),
        ({"seed": 1.5}, "seed must be an int, got 1.5"),
        ({"seed": float("nan")}, "seed must be an int, got nan"),
        ({"seed": "3"}, "seed must be an int, got '3'"),
        ({"seed": -1}, "seed must be >= 0, got -1"),
        ({"seed": 2**64}, rf"seed must be <= {2**64 - 1}, got {2**64}"),
        ({"seed": 2**64 - 2}, r"seed \+ env_id must stay below 2\*\*64"),
        ({"seeds": [-1] * N}, r"seeds\[0\] must be >= 0, got -1"),
        ({"seeds": [0.5] * N}, r"seeds\[0\] must be an int, got 0.5"),
        ({"seeds": 7}, "seeds must be a sequence of 3 ints"),
        ({"seeds": [1, 2]}, r"seeds must have one entry per env \(3\), got 2"),
        ({"max_episode_steps": 2**31}, rf"max_episode_steps must be <= {2**31 - 1}"),
        ({"max_episode_steps": 1.5}, "max_episode_steps must be an int, got 1.5"),
        ({"max_episode_steps": "10"}, "max_episode_steps must be an int, got '10'"),
        ({"max_episode_steps": 0}, r"max_episode_steps must be >= 1 \(None: the env's default\), got 0"),
        ({"num_threads": 2**31}, rf"num_threads must be <= {2**31 - 1}"),
        ({"batch_size": 2**31}, rf"batch_size must be <= {2**31 - 1}"),
        ({"thread_affinity_offset": 10**12}, "thread_affinity_offset must be <="),
        ({"thread_affinity_offset": 1.5}, "thread_affinity_offset must be an int, got 1.5"),
        ({"work_in_recv": "yes"}, "work_in_recv must be a bool"),
        ({"pin_memory": "yes"}, "pin_memory must be a bool or None"),
    ],
)
def test_bad_pool_arguments_name_parameter_and_value(kwargs, match):
    with pytest.raises(ValueError, match=match):
        rlfast.make("CartPole-v1", N, **kwargs)


@pytest.mark.parametrize(
    "args,match",
    [
        ((None, 4), "task_id must be a string such as 'CartPole-v1', got None"),
        (("CartPole-v1", None), "num_envs must be an int, got None"),
        (("CartPole-v1", 2**31), rf"num_envs must be <= {2**31 - 1}, got {2**31}"),
        (("CartPole-v1", True), "num_envs must be an int, got True"),
    ],
)
def test_bad_task_or_num_envs(args, match):
    with pytest.raises(ValueError, match=match):
        rlfast.make(*args)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only rule")
def test_pin_memory_without_cuda_is_a_value_error():
    with pytest.raises(ValueError, match="pin_memory=True needs CUDA"):
        rlfast.make("CartPole-v1", 2, pin_memory=True)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only rule")
def test_frame_stack_on_missing_cuda_is_a_value_error():
    with pytest.raises(ValueError, match="device 'cuda'.*torch.cuda.is_available\\(\\) is False"):
        FrameStack(4, 4, (84, 84), device="cuda")


def test_num_threads_is_capped_at_num_envs():
    with rlfast.make("CartPole-v1", 1, num_threads=300) as pool:
        assert pool.num_threads == 1
    with rlfast.make("CartPole-v1", 3, num_threads=8, work_in_recv=True) as pool:
        assert pool.num_threads == 3


@pytest.mark.parametrize(
    "task,kwargs,match",
    [
        ("Pendulum-v1", {"g": float("nan")}, "option 'g' of Pendulum-v1 got nan; it must be finite"),
        ("Pendulum-v1", {"g": float("inf")}, "option 'g' of Pendulum-v1 got inf; it must be finite"),
        ("Humanoid-v5", {"healthy_z_range": (2.0, 1.0)}, "healthy_z_range.*low <= high"),
        ("Humanoid-v5", {"contact_cost_range": (float("nan"), 1.0)}, "contact_cost_range.*low <= high"),
        ("Pong-v5", {"stack_num": 10**6}, r"stack_num must be in \[1, 64\], got 1000000"),
        ("Pong-v5", {"frame_skip": 10**6}, r"frame_skip must be in \[1, 1000\]"),
        ("Pong-v5", {"noop_max": 10**9}, r"noop_max must be in \[0, 100000\]"),
        ("Pong-v5", {"img_height": 10**6}, r"img_height must be in \[1, 210\]"),
    ],
)
def test_bad_env_options(task, kwargs, match):
    with pytest.raises(ValueError, match=match):
        rlfast.make(task, 2, **kwargs)


def test_infinite_range_bounds_stay_allowed():
    # gymnasium's own default for Humanoid's contact_cost_range is (-inf, 10.0).
    with rlfast.make("Humanoid-v5", 1, contact_cost_range=(-float("inf"), 10.0)) as pool:
        pool.reset()


@pytest.mark.parametrize(
    "task,num_envs",
    [("Pong-v5", 10**6), ("CartPole-v1", 2**31 - 1), ("Ant-v5", 10**7)],
)
def test_pool_that_cannot_fit_is_refused_before_allocating(task, num_envs):
    start = time.perf_counter()
    refusal = r"needs about [\d.]+ [KMGTP]B .* but this machine has [\d.]+ [KMGTP]B available"
    with pytest.raises(ValueError, match=refusal):
        rlfast.make(task, num_envs)
    # Refused from the estimate: nothing was built (building a million Pong envs takes hours).
    assert time.perf_counter() - start < 30


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.parametrize("task,num_envs", [("Pong-v5", 48), ("Ant-v5", 48), ("CartPole-v1", 20000)])
def test_memory_estimate_is_within_2x_of_resident_growth(task, num_envs):
    rlfast.make(task, 1).close()  # one-time costs (ROM, model cache, libraries) before the baseline
    # Freed heap from earlier tests in this process would be reused by the pool and hide its growth
    # (seen once: 0.48x of the estimate after the whole suite); hand it back to the system first.
    ctypes.CDLL(None).malloc_trim(0)
    before = _rss_bytes()
    with rlfast.make(task, num_envs) as pool:
        pool.reset()
        for _ in range(5):
            actions = np.stack([pool.single_action_space.sample() for _ in range(num_envs)])
            pool.step(actions)
        grown = _rss_bytes() - before
        estimate = pool.memory_estimate
    assert 0.5 * estimate <= grown <= 2.0 * estimate, (task, grown, estimate)


class TestPoolMethods:
    @pytest.fixture
    def pool(self):
        p = rlfast.make("CartPole-v1", N)
        p.reset()
        yield p
        p.close()

    @pytest.mark.parametrize(
        "seed,match",
        [
            (-1, "seed must be >= 0, got -1"),
            (None, "seed must be an int, got None"),
            (1.5, "seed must be an int, got 1.5"),
            ("abc", "seed must be an int, got 'abc'"),
            (2**64 - 1, "seed must be <="),
            ([1, 2], r"seed must have one entry per env \(3\), got 2"),
            ([1, -2, 3], r"seed\[1\] must be >= 0, got -2"),
        ],
    )
    def test_bad_seed(self, pool, seed, match):
        with pytest.raises(ValueError, match=match):
            pool.seed(seed)

    @pytest.mark.parametrize("seed", ["abc", float("nan"), -1])
    def test_bad_reset_seed(self, pool, seed):
        with pytest.raises(ValueError, match="seed must be"):
            pool.reset(seed=seed)

    def test_zero_d_array_seed_is_a_scalar(self, pool):
        pool.seed(np.array(3))
        a, _ = pool.reset()
        a = a.clone()
        pool.seed(3)
        b, _ = pool.reset()
        assert torch.equal(a, b)

    def test_seed_of_some_envs(self, pool):
        with pytest.raises(ValueError, match="seed: env id 0 appears more than once"):
            pool.seed(1, env_ids=[0, 0])
        with pytest.raises(ValueError, match="seed: env id 7 is out of range for a pool of 3 envs"):
            pool.seed(1, env_ids=[7])
        pool.seed([5, 6], env_ids=[2, 0])  # env 2 gets 5, env 0 gets 6

    def test_seed_on_closed_pool(self, pool):
        pool.close()
        with pytest.raises(PoolStateError, match="closed"):
            pool.seed(1)

    @pytest.mark.parametrize(
        "actions,match",
        [
            (torch.zeros(N, dtype=torch.bfloat16), "actions has dtype torch.bfloat16"),
            (torch.zeros(N, device="meta"), "actions is a meta tensor"),
            (np.array(["a", "b", "c"]), "actions has dtype <U1"),
        ],
    )
    def test_unsendable_actions(self, pool, actions, match):
        with pytest.raises(ValueError, match=match):
            pool.send(actions)
        pool.step(np.zeros(N, dtype=np.int64))  # nothing was sent

    @pytest.mark.parametrize(
        "env_ids,match",
        [
            ([2**40], r"env_ids\[0\] = 1099511627776 is out of range for a pool of 3 envs"),
            ([True], "env_ids has dtype bool; expected integers"),
            (torch.zeros(1, dtype=torch.int64, device="meta"), "env_ids is a meta tensor"),
            ([], r"send\(\) needs at least one env id, got an empty env_ids"),
        ],
    )
    def test_bad_env_ids(self, pool, env_ids, match):
        with pytest.raises(ValueError, match=match):
            pool.send(np.zeros(1, dtype=np.int64), env_ids)

    def test_async_reset_of_no_envs(self, pool):
        with pytest.raises(ValueError, match=r"async_reset\(\) needs at least one env id, got an empty env_ids"):
            pool.async_reset([])


class TestContinuousActions:
    @pytest.fixture
    def pool(self):
        p = rlfast.make("Pendulum-v1", 2)
        p.reset()
        yield p
        p.close()

    def test_float64_beyond_float32_is_rejected(self, pool):
        rule = r"action for env 1 \(row 1, element 0\) is 1e\+300; actions must be finite"
        with pytest.raises(ValueError, match=rule):
            pool.send(np.array([[0.0], [1e300]]))

    def test_ragged_actions(self, pool):
        with pytest.raises(ValueError, match="actions is not a rectangular array"):
            pool.send([[0.1], [0.2, 0.3]])

    def test_float64_within_range_is_accepted(self, pool):
        pool.step(np.array([[0.5], [-1.5]]))


def test_parallel_build_gives_the_same_envs_as_a_serial_one():
    # Each env is seeded by its id, whichever builder thread made it.
    with rlfast.make("Pong-v5", 6, num_threads=1) as serial, rlfast.make("Pong-v5", 6, num_threads=3) as parallel:
        a, _ = serial.reset()
        b, _ = parallel.reset()
        assert torch.equal(a, b)
        for _ in range(20):
            actions = np.arange(6) % serial.single_action_space.n
            a = serial.step(actions)[0]
            b = parallel.step(actions)[0]
            assert torch.equal(a, b)


def test_make_releases_the_gil_while_building():
    counted = []
    stop = threading.Event()

    def count():
        n = 0
        while not stop.is_set():
            n += 1
        counted.append(n)

    t = threading.Thread(target=count)
    t.start()
    try:
        start = time.perf_counter()
        rlfast.make("Pong-v5", 64, num_threads=1).close()
        took = time.perf_counter() - start
    finally:
        stop.set()
        t.join()
    # With the GIL held through construction the counter would barely move; released, it
    # spins on the other core (or shares one) for most of the build.
    assert counted[0] > 10_000, (counted, took)


def test_ctrl_c_interrupts_make(sigint_raises):
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    start = time.perf_counter()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            rlfast.make("Pong-v5", 2000, num_threads=1)  # ~15 s to build on one thread
    finally:
        timer.cancel()
    assert time.perf_counter() - start < 10
    with rlfast.make("Pong-v5", 2) as pool:  # nothing left behind
        pool.reset()


@pytest.mark.parametrize(
    "bug,match",
    [
        (1, r"Dummy-v0: info field 0 is 'last_action' \(float32 x 1\) in the env's step but 'last_action' \(int32"),
        (2, r"Dummy-v0: info field 1 is 'extra' \(int32 x 1\) in the env's step but nothing in its spec"),
    ],
)
def test_env_whose_info_disagrees_with_its_spec_is_refused_at_make(bug, match):
    with pytest.raises(RuntimeError, match=match):
        rlfast.make("Dummy-v0", 2, info_layout_bug=bug)


def test_reseed_with_the_gil_released_does_not_deadlock_a_concurrent_send():
    # seed() polls for Ctrl-C with the GIL while it reseeds; a thread sending meanwhile holds
    # the GIL and must get an answer (the envs being reseeded count as in flight), not a hang.
    with rlfast.make("Pong-v5", 64, num_threads=1) as pool:
        pool.reset()
        errors, done = [], threading.Event()

        def sender():
            while not done.is_set():
                try:
                    pool.step(np.zeros(64, dtype=np.int64))
                except PoolStateError as e:
                    errors.append(e)

        t = threading.Thread(target=sender)
        t.start()
        try:
            for _ in range(3):
                try:
                    pool.seed(7)
                except PoolStateError:
                    pass  # the sender had envs in flight at that moment
        finally:
            done.set()
            t.join(timeout=60)
        assert not t.is_alive()
