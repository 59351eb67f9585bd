"""Randomized send/recv/reset sequences: no deadlock, no lost or duplicated env."""

import os
import time

import numpy as np
import pytest

import rlfast
from rlfast import PoolStateError


@pytest.mark.parametrize(
    "num_envs,batch_size,num_threads,work_in_recv",
    [(7, 3, 2, False), (5, 5, 3, False), (9, 1, 4, False), (16, 4, 2, False), (7, 3, 0, True), (9, 1, 1, True),
     (16, 4, 2, True)],
)  # fmt: skip
def test_random_send_recv_sequences_keep_every_env(num_envs, batch_size, num_threads, work_in_recv):
    rng = np.random.default_rng(num_envs * 100 + batch_size)
    pool = rlfast.make(
        "Dummy-v0", num_envs=num_envs, batch_size=batch_size, num_threads=num_threads, jitter_us=50, episode_length=5,
        work_in_recv=work_in_recv,
    )  # fmt: skip
    in_flight: set[int] = set()
    idle = set(range(num_envs))
    last_action = {}
    for _ in range(400):
        op = rng.integers(0, 3)
        if op == 0 and idle:  # send a random subset of idle envs
            k = int(rng.integers(1, len(idle) + 1))
            ids = rng.choice(sorted(idle), size=k, replace=False).astype(np.int32)
            actions = rng.integers(0, 1000, size=k)
            pool.send(actions, ids)
            for i, a in zip(ids.tolist(), actions.tolist()):
                last_action[i] = a
            idle -= set(ids.tolist())
            in_flight |= set(ids.tolist())
        elif op == 1 and idle and not in_flight:  # reset everything idle
            ids = np.array(sorted(idle), dtype=np.int32)
            pool.async_reset(ids)
            for i in ids.tolist():
                last_action[i] = None
            in_flight |= idle
            idle = set()
        elif len(in_flight) >= batch_size:
            obs, reward, term, trunc, info = pool.recv()
            ids = info["env_id"].tolist()
            assert len(set(ids)) == batch_size and set(ids) <= in_flight
            for row, i in enumerate(ids):
                if last_action[i] is not None and obs[row, 1] > 0:
                    assert reward[row] == last_action[i]
            in_flight -= set(ids)
            idle |= set(ids)
        else:
            with pytest.raises(PoolStateError):
                pool.recv()
    # Drain: everything in flight must come back.
    while len(in_flight) >= batch_size:
        ids = pool.recv()[4]["env_id"].tolist()
        in_flight -= set(ids)
    assert len(in_flight) < batch_size
    pool.close()


@pytest.mark.parametrize("work_in_recv", [False, True])
def test_oversubscribed_pool_steps_every_env_exactly_once_per_send(work_in_recv):
    # More threads than cores and ~1 us steps: workers get preempted at any point (between
    # claiming a queue index and reading its item, between claiming an output slot and
    # committing it) while the other envs keep cycling. Every batch must still hold distinct
    # envs, each advanced by exactly one step (or reset after its episode ended).
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    pool = rlfast.make("CartPole-v1", num_envs=8, batch_size=4, num_threads=cores + 1, work_in_recv=work_in_recv)
    pool.async_reset()
    info = pool.recv()[4]
    last = dict.fromkeys(range(8), None)
    actions = np.zeros(4, dtype=np.int32)
    deadline, batches = time.monotonic() + 3.0, 0
    while time.monotonic() < deadline or batches < 1000:
        ids, elapsed = info["env_id"].tolist(), info["elapsed_step"].tolist()
        assert len(set(ids)) == 4, f"batch {batches} repeats an env: {ids}"
        for i, e in zip(ids, elapsed):
            prev = last[i]
            assert prev is None or e == prev + 1 or e == 0, f"env {i} went from step {prev} to {e}"
            last[i] = e
        pool.send(actions, info["env_id"])
        info = pool.recv()[4]
        batches += 1
    pool.close()
