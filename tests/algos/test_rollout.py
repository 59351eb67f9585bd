"""Rollout's channels-last frames and take_rows: the minibatch rows the update reads are the same values, in the
layout the CNN computes in, and an update from such a rollout is the update from a plain one, bit for bit."""

import pytest
import torch

from rlfast.algos.ppo import Rollout, take_rows

CL = torch.channels_last


def frames(*shape, seed=0):
    return torch.randint(0, 256, shape, dtype=torch.uint8, generator=torch.Generator().manual_seed(seed))


def test_take_rows_selects_channels_last_frames_as_stored():
    x = frames(10, 4, 6, 5).contiguous(memory_format=CL)
    rows = torch.tensor([7, 0, 7, 3])
    got = take_rows(x, rows)
    assert torch.equal(got, x.index_select(0, rows)) and got.shape == (4, 4, 6, 5)
    assert got.is_contiguous(memory_format=CL) and not got.is_contiguous()


@pytest.mark.parametrize("x", [frames(10, 4, 6, 5), torch.arange(10.0), frames(10, 3), frames(10, 1, 1, 1)])
def test_take_rows_is_index_select_elsewhere(x):
    rows = torch.tensor([9, 1, 1])
    got = take_rows(x, rows)
    assert torch.equal(got, x.index_select(0, rows)) and got.stride() == x.index_select(0, rows).stride()


def test_a_channels_last_rollout_stores_and_returns_the_same_frames():
    T, B, shape = 3, 2, (4, 6, 5)
    plain, cl = Rollout(T, B, shape, obs_dtype=torch.uint8), Rollout(T, B, shape, obs_dtype=torch.uint8,
                                                                     obs_memory_format=CL)  # fmt: skip
    assert cl.obs.shape == plain.obs.shape == (T, B, *shape)
    for t in range(T):
        obs = frames(B, *shape, seed=t)
        plain.store(t, obs=obs)
        cl.store(t, obs=obs.contiguous(memory_format=CL))
    a, b = plain.batch(torch.zeros(T, B), torch.zeros(T, B)), cl.batch(torch.zeros(T, B), torch.zeros(T, B))
    assert torch.equal(a["obs"], b["obs"]) and b["obs"].is_contiguous(memory_format=CL)
    assert b["obs"].data_ptr() == cl.obs.data_ptr()  # a view of the storage, no copy
    rows = torch.tensor([5, 0, 2])
    assert torch.equal(take_rows(b["obs"], rows), a["obs"].index_select(0, rows))
    with pytest.raises(ValueError, match=r"for frames \[C, H, W\], got obs_shape \(30,\)"):
        Rollout(T, B, (30,), obs_memory_format=CL)


def test_an_update_from_a_channels_last_rollout_is_the_same_update(load_script):
    ppo = load_script("ppo_atari.py")
    shape = (4, 84, 84)

    def weights(agent) -> torch.Tensor:
        return torch.cat([p.detach().flatten() for p in agent.parameters()])

    def updated(memory_format) -> tuple[torch.Tensor, torch.Tensor]:
        torch.manual_seed(0)
        args = ppo.Args(num_envs=2, num_steps=8, update_epochs=2, num_minibatches=2)
        agent = ppo.Agent(4, 6)
        before = weights(agent)
        ppo.set_speed(agent, channels_last=True)
        rollout = ppo.Rollout(8, 2, shape, obs_dtype=torch.uint8, obs_memory_format=memory_format)
        for t in range(8):
            rollout.store(t, obs=frames(2, *shape, seed=t).contiguous(memory_format=memory_format),
                          actions=torch.tensor([t % 6, (t + 1) % 6]), logprobs=torch.full((2,), -1.8),
                          values=torch.full((2,), 0.1 * t), rewards=torch.tensor([1.0, 0.0]))  # fmt: skip
        opt = torch.optim.Adam(agent.parameters(), lr=1e-3)
        next_obs = frames(2, *shape, seed=99).contiguous(memory_format=memory_format)
        ppo.update(agent, opt, ppo.minibatch_loss, rollout, next_obs, torch.zeros(2), torch.zeros(2), args)
        return before, weights(agent)

    (before, plain), (_, cl) = updated(torch.contiguous_format), updated(CL)
    assert not torch.equal(plain, before)  # the update moved the weights
    assert torch.equal(plain, cl)
