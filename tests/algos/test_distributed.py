"""rlfast.algos.distributed: the world from torchrun's environment, and the collectives on two gloo ranks
(spawned here), including a parameter check that does fail when one rank's copy differs."""

import contextlib
import dataclasses
import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from rlfast.algos.config import with_local_num_envs
from rlfast.algos.distributed import OutOfSync, World
from rlfast.algos.runargs import RunArgs


def test_world_from_env():
    assert World.from_env({}) == World()
    w = World.from_env({"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"})
    assert (w.rank, w.world_size, w.local_rank, w.local_world_size) == (3, 4, 1, 2)
    assert w.distributed and not w.is_main
    assert w.shard(8) == slice(6, 8)
    assert w.cpu_share(16) == 8 and w.cpu_share(1) == 1
    with pytest.raises(ValueError, match="cannot be shared evenly by 4 ranks"):
        w.shard(6)
    with pytest.raises(ValueError, match="inconsistent"):
        World.from_env({"RANK": "4", "WORLD_SIZE": "4"})
    with pytest.raises(ValueError, match="must be integers"):
        World.from_env({"RANK": "x", "WORLD_SIZE": "4"})


def test_local_num_envs_sets_the_global_count(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    assert with_local_num_envs(RunArgs(num_envs=4, local_num_envs=3)).num_envs == 6
    assert with_local_num_envs(RunArgs(num_envs=4)).num_envs == 4


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _collectives(rank: int, port: int, results) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    world = World(rank, 2, rank, 2)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        out = {}
        # gradients: summed over ranks; a parameter without a gradient counts as zeros
        a, b = torch.nn.Parameter(torch.zeros(3)), torch.nn.Parameter(torch.zeros(2, 2))
        a.grad = torch.full((3,), float(rank + 1))
        if rank == 1:
            b.grad = torch.ones(2, 2)
        world.sync_grads([a, b])
        out["grads"] = (a.grad.tolist(), b.grad.tolist())
        out["sum"] = world.sum(torch.tensor([rank, 10.0])).tolist()
        out["flag"] = world.broadcast(rank == 0, torch.device("cpu"))
        cols = world.gather_columns([torch.full((2, 1), rank), torch.tensor([[rank == 1]])])
        out["columns"] = [c.tolist() for c in cols]
        same = [torch.nn.Parameter(torch.arange(4.0))]
        world.check_in_sync(same)  # identical copies: no error
        differs = [torch.nn.Parameter(torch.arange(4.0) + (1e-6 if rank == 1 else 0.0))]
        try:
            world.check_in_sync(differs, "agent's parameters")
            out["out_of_sync"] = None
        except OutOfSync as e:
            out["out_of_sync"] = str(e)
        # a global minibatch's statistics from each rank's share; the rows of each global minibatch
        x = torch.tensor([1.0, 2.0, 3.0]) if rank == 0 else torch.tensor([4.0])
        out["mean_std"] = [t.item() for t in world.mean_std(x, 4)]
        perm = torch.tensor([5, 0, 3, 6, 1, 2, 4, 7])  # rows of [T=2, 4 envs]: env = row % 4
        out["minibatches"] = [(rows.tolist(), share) for rows, share in world.minibatches(perm, 4, num_envs=2)]
        timed = []
        with_timer = dataclasses.replace(world, comm=lambda: timed.append(1) or contextlib.nullcontext())
        with_timer.sum(torch.zeros(1))
        out["timed"] = len(timed)
        results[rank] = out
    finally:
        dist.destroy_process_group()


def test_collectives_on_two_gloo_ranks():
    results = mp.Manager().dict()
    mp.spawn(_collectives, args=(_free_port(), results), nprocs=2, join=True)
    for rank in (0, 1):
        r = results[rank]
        assert r["grads"] == ([3.0, 3.0, 3.0], [[1.0, 1.0], [1.0, 1.0]])
        assert r["sum"] == [1.0, 20.0]
        assert r["flag"] is True
        assert r["columns"] == [[[0, 1], [0, 1]], [[False, True]]]
        assert "rank(s) [1] differ from rank 0's" in r["out_of_sync"]
        assert "agent's parameters" in r["out_of_sync"]
        assert r["mean_std"] == pytest.approx([2.5, torch.tensor([1.0, 2, 3, 4]).std().item()])
        assert r["timed"] == 1  # every collective runs in world.comm()
    # global rows 5, 0, 3, 6 | 1, 2, 4, 7: rank 0 holds envs 0-1 (rows t * 2 + env), rank 1 envs 2-3
    assert results[0]["minibatches"] == [([3, 0], 0.5), ([1, 2], 0.5)]
    assert results[1]["minibatches"] == [([1, 2], 0.5), ([0, 3], 0.5)]


def test_the_world_of_one_process_is_the_identity():
    world = World()
    t = torch.tensor([1.0, 2.0])
    assert world.sum(t) is t and world.broadcast(True, torch.device("cpu")) is True
    assert world.gather_columns([t]) == [t]
    p = torch.nn.Parameter(torch.ones(2))
    p.grad = torch.ones(2)
    world.sync_grads([p])
    world.check_in_sync([p])
    assert p.grad.tolist() == [1.0, 1.0]
    perm = torch.randperm(8)
    expected = [(perm[:4].tolist(), 1.0), (perm[4:].tolist(), 1.0)]
    assert [(r.tolist(), s) for r, s in world.minibatches(perm, 4)] == expected
    x = torch.randn(7)
    mean, std = world.mean_std(x, 7)
    assert torch.equal(mean, x.mean()) and torch.equal(std, x.std())
