"""Pool semantics: ordering, async coverage, routing, autoreset, seeding, zero-copy."""

import time

import numpy as np
import pytest
import torch

import rlfast

pytestmark = pytest.mark.wheel


def dummy(num_envs, batch_size=None, **kw):
    return rlfast.make("Dummy-v0", num_envs=num_envs, batch_size=batch_size, **kw)


def test_sync_results_are_ordered_by_env_id():
    with dummy(6, num_threads=3, jitter_us=300) as pool:
        obs, info = pool.reset()
        assert info["env_id"].tolist() == list(range(6))
        for step in range(1, 4):
            actions = np.arange(6, dtype=np.int32) * 10 + step
            obs, reward, term, trunc, info = pool.step(actions)
            assert info["env_id"].tolist() == list(range(6))
            assert obs[:, 0].tolist() == actions.astype(float).tolist()
            assert reward.tolist() == actions.astype(float).tolist()
            assert info["elapsed_step"].tolist() == [step] * 6


def test_async_recv_returns_batches_of_distinct_envs_covering_all():
    num_envs, batch = 8, 3
    with dummy(num_envs, batch, num_threads=2, jitter_us=200) as pool:
        pool.async_reset()
        seen = np.zeros(num_envs, dtype=int)
        for _ in range(60):
            obs, reward, term, trunc, info = pool.recv()
            ids = info["env_id"].numpy().copy()
            assert len(ids) == batch and len(set(ids.tolist())) == batch
            seen[ids] += 1
            pool.send(ids.astype(np.int32) * 3, ids)
        assert (seen > 0).all(), f"some env never came back: {seen}"


def test_each_action_reaches_its_own_env_in_async_mode():
    num_envs, batch = 10, 4
    rng = np.random.default_rng(0)
    with dummy(num_envs, batch, num_threads=3, jitter_us=300) as pool:
        pool.async_reset()
        sent = {}
        for _ in range(50):
            obs, reward, term, trunc, info = pool.recv()
            ids = info["env_id"].numpy().copy()
            for row, env_id in enumerate(ids):
                if env_id in sent and obs[row, 1] > 0:  # a real step (not a reset) came back
                    assert obs[row, 0] == sent[env_id]
                    assert info["last_action"][row] == sent[env_id]
            actions = rng.integers(0, 1000, size=len(ids)).astype(np.int64)
            sent.update(zip(ids.tolist(), actions.tolist()))
            pool.send(actions, ids)


@pytest.mark.parametrize("work_in_recv", [False, True])
def test_recv_waits_for_its_own_block_when_a_later_one_completes_first(work_in_recv):
    # Env 0's result is claimed first (block 0) but written slowly (300 ms between its slot
    # claim and its commit); env 1's result fills block 1 meanwhile. recv must still return
    # block 0 complete: env 0 with its action, not the zeros of a block nobody finished.
    with dummy(3, 1, num_threads=2, slow_write_action=7, slow_write_us=300_000, work_in_recv=work_in_recv) as pool:
        pool.async_reset()
        done = sorted(int(pool.recv()[4]["env_id"][0]) for _ in range(3))
        assert done == [0, 1, 2]
        pool.send(np.array([7]), np.array([0]))
        time.sleep(0.1)  # a worker is now inside env 0's slow write
        pool.send(np.array([1]), np.array([1]))
        first = pool.recv()
        assert first[4]["env_id"].tolist() == [0] and first[0][0, 0] == 7.0
        second = pool.recv()
        assert second[4]["env_id"].tolist() == [1] and second[0][0, 0] == 1.0


def test_next_step_autoreset_and_episode_bookkeeping():
    with dummy(2, episode_length=3) as pool:
        pool.reset()
        returns = []
        for _ in range(3):
            obs, reward, term, trunc, info = pool.step(np.array([2, 5]))
            returns.append(info["episode_return"].tolist())
        assert term.tolist() == [True, True]
        assert returns[-1] == [6.0, 15.0]
        assert info["episode_length"].tolist() == [3, 3]
        obs, reward, term, trunc, info = pool.step(np.array([7, 7]))  # the reset step
        assert reward.tolist() == [0.0, 0.0] and not term.any() and not trunc.any()
        assert obs[:, 1].tolist() == [0.0, 0.0] and info["elapsed_step"].tolist() == [0, 0]
        assert info["episode_return"].tolist() == [0.0, 0.0]
        obs, reward, *_ = pool.step(np.array([7, 7]))
        assert reward.tolist() == [7.0, 7.0] and obs[:, 1].tolist() == [1.0, 1.0]


def test_same_step_autoreset_puts_final_obs_in_info():
    with dummy(2, episode_length=2, autoreset_mode="same_step") as pool:
        pool.reset()
        pool.step(np.array([1, 2]))
        obs, reward, term, trunc, info = pool.step(np.array([3, 4]))
        assert term.tolist() == [True, True]
        assert info["final_obs"][:, 0].tolist() == [3.0, 4.0]
        assert info["final_obs"][:, 1].tolist() == [2.0, 2.0]
        assert obs[:, 1].tolist() == [0.0, 0.0], "obs must already be the new episode's"
        assert info["episode_return"].tolist() == [4.0, 6.0]
        obs, reward, *_ = pool.step(np.array([5, 5]))
        assert reward.tolist() == [5.0, 5.0] and obs[:, 1].tolist() == [1.0, 1.0]


def test_max_episode_steps_truncates():
    with dummy(3, episode_length=100, max_episode_steps=4) as pool:
        pool.reset()
        for _ in range(3):
            _, _, term, trunc, _ = pool.step(np.zeros(3, dtype=np.int32))
            assert not trunc.any()
        _, _, term, trunc, info = pool.step(np.zeros(3, dtype=np.int32))
        assert trunc.all() and not term.any()
        assert info["elapsed_step"].tolist() == [4, 4, 4]


def test_recv_reuses_the_same_ring_of_buffers():
    num_envs, batch = 6, 2
    with dummy(num_envs, batch, num_threads=2) as pool:
        pool.async_reset()
        ptrs = []
        for _ in range(40):
            obs, reward, term, trunc, info = pool.recv()
            ptrs.append((obs.data_ptr(), reward.data_ptr(), info["env_id"].data_ptr()))
            pool.send(np.zeros(batch, dtype=np.int32), info["env_id"])
        k = pool._pool.num_blocks
        assert len(set(ptrs)) == k
        assert ptrs[:k] == ptrs[k : 2 * k], "blocks must be returned in ring order"


@pytest.mark.parametrize("task_id,kwargs", [("CartPole-v1", {}), ("Dummy-v0", {"jitter_us": 200})])
def test_sync_rollout_is_identical_for_any_num_threads(task_id, kwargs):
    def rollout(num_threads, work_in_recv=False):
        rng = np.random.default_rng(1)
        with rlfast.make(
            task_id, num_envs=8, num_threads=num_threads, seed=3, work_in_recv=work_in_recv, **kwargs
        ) as pool:
            n = pool.single_action_space.n
            obs, _ = pool.reset()
            out = [obs.clone()]
            for _ in range(150):
                obs, reward, term, trunc, _ = pool.step(rng.integers(0, n, size=8))
                out += [obs.clone(), reward.clone(), term.clone(), trunc.clone()]
        return out

    ref = rollout(1)
    for threads, work_in_recv in ((2, False), (4, False), (0, True), (2, True)):
        got = rollout(threads, work_in_recv)
        assert all(torch.equal(a, b) for a, b in zip(ref, got)), f"num_threads={threads} {work_in_recv=} differs"


@pytest.mark.parametrize("num_threads", [0, 1, 3])
def test_work_in_recv_async_pool_delivers_every_env_its_own_actions(num_threads):
    # recv steps queued envs itself (and with 0 workers, all of them): batches still hold
    # distinct envs, each result answers that env's own action, and every env comes back.
    num_envs, batch = 9, 4
    rng = np.random.default_rng(num_threads)
    with dummy(num_envs, batch, num_threads=num_threads, work_in_recv=True, jitter_us=200) as pool:
        assert pool.num_threads == num_threads
        pool.async_reset()
        seen, sent = np.zeros(num_envs, dtype=int), {}
        for _ in range(80):
            obs, reward, term, trunc, info = pool.recv()
            ids = info["env_id"].numpy().copy()
            assert len(set(ids.tolist())) == batch
            for row, env_id in enumerate(ids):
                if env_id in sent and obs[row, 1] > 0:
                    assert info["last_action"][row] == sent[env_id]
            seen[ids] += 1
            actions = rng.integers(0, 1000, size=batch).astype(np.int64)
            sent.update(zip(ids.tolist(), actions.tolist()))
            pool.send(actions, ids)
        assert (seen > 0).all(), f"some env never came back: {seen}"


def test_work_in_recv_default_threads_count_the_calling_thread():
    import os

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    with dummy(1, work_in_recv=True) as pool:
        assert pool.num_threads == 0  # a single env steps inside recv: no hand-off at all
    with dummy(8, work_in_recv=True) as pool, dummy(8) as plain:
        assert pool.num_threads == plain.num_threads - 1
        assert plain.num_threads == min(8, os.cpu_count()) or plain.num_threads == min(8, cores)


def test_seeds_drive_resets():
    def first_obs(**kw):
        with rlfast.make("CartPole-v1", num_envs=4, **kw) as pool:
            return pool.reset()[0].clone()

    assert torch.equal(first_obs(seed=5), first_obs(seed=5))
    assert not torch.equal(first_obs(seed=5), first_obs(seed=6))
    # seed + env_id by default, so an explicit list reproduces it.
    assert torch.equal(first_obs(seed=5), first_obs(seeds=[5, 6, 7, 8]))
    # Envs of one pool differ from each other.
    obs = first_obs(seed=0)
    assert len({tuple(r.tolist()) for r in obs}) == 4


def test_reset_with_seed_reseeds_like_gymnasium():
    with rlfast.make("CartPole-v1", num_envs=3, seed=0) as pool:
        a = pool.reset(seed=42)[0].clone()
        pool.step(np.ones(3, dtype=np.int32))
        b = pool.reset(seed=42)[0].clone()
        c = pool.reset()[0].clone()
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


def test_outputs_are_torch_tensors_with_declared_dtypes():
    with rlfast.make("CartPole-v1", num_envs=2) as pool:
        obs, info = pool.reset()
        assert obs.dtype == torch.float32 and obs.shape == (2, 4)
        obs, reward, term, trunc, info = pool.step(torch.zeros(2, dtype=torch.int64))
        assert reward.dtype == torch.float32 and term.dtype == torch.bool and trunc.dtype == torch.bool
        assert info["env_id"].dtype == torch.int32 and info["episode_length"].dtype == torch.int32
        assert pool.single_observation_space.shape == (4,)
        assert pool.single_action_space.n == 2


def test_list_envs_and_repr():
    envs = rlfast.list_envs()
    assert "CartPole-v1" in envs and "Dummy-v0" not in envs
    assert "Dummy-v0" in rlfast.list_envs(include_testing=True)
    with rlfast.make("CartPole-v1", num_envs=4, batch_size=2) as pool:
        assert "async" in repr(pool) and pool.num_threads >= 1


@pytest.mark.cuda
def test_outputs_are_pinned_when_cuda_is_available():
    with rlfast.make("CartPole-v1", num_envs=4) as pool:
        obs, _ = pool.reset()
        assert obs.is_pinned()
        assert torch.equal(obs.to("cuda", non_blocking=True).cpu(), obs)


@pytest.mark.cuda
def test_cuda_actions_go_through_one_pinned_buffer_and_step_like_host_actions():
    actions = torch.tensor([0, 1, 1, 0])
    with rlfast.make("CartPole-v1", num_envs=4, seed=3) as a, rlfast.make("CartPole-v1", num_envs=4, seed=3) as b:
        a.reset(), b.reset()
        for _ in range(3):
            obs_a = a.step(actions.cuda())[0].clone()
            obs_b = b.step(actions)[0].clone()
            assert torch.equal(obs_a, obs_b)
        (buf,) = a._staging.values()
        assert buf.is_pinned() and buf.shape == (4,) and buf.dtype == torch.int64
        a.send(actions[:2].cuda(), torch.tensor([1, 3]))  # a subset reuses the same buffer
        assert list(a._staging.values()) == [buf]
