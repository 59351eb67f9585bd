"""APPO's pieces (rlfast/algos/appo.py, appo_sampler.py, appo_trajectories.py): trajectories assembled from async
result batches against the streams that made them, the learner's weights reaching the sampler (immediate and
alternating), the sampler's exception surfacing on the learner's side, episode statistics of env subsets, and
the masked loss."""

import queue
import threading
from dataclasses import dataclass

import pytest
import torch

import rlfast
from rlfast.algos.appo import APPOArgs, appo_loss, taken_logprobs, update_kl
from rlfast.algos.nets import MLPAgent, NatureCNNAgent
from rlfast.algos.runargs import RunArgs
from rlfast.algos.episodes import Episodes
from rlfast.algos.appo_sampler import PublishedWeights, Sampler, Stopped
from rlfast.algos.appo_trajectories import Trajectories, TrajectoryBuilder


@dataclass
class Args(APPOArgs, RunArgs):
    """APPOArgs composed with the run layer's flags, as scripts/appo.py does."""

def encode(env, t):
    """The observation of env ``env`` at its stream step ``t``: both numbers readable back."""
    return torch.stack((env.float(), t.float()), 1)


def test_builder_assembles_each_envs_steps_in_order_from_async_batches():
    N, T, K = 6, 5, 4
    g = torch.Generator().manual_seed(0)
    emitted, free = [], queue.Queue()
    for _ in range(60):
        free.put(Trajectories(K, T, ((2,), torch.float32), (), torch.long, torch.device("cpu")))
    builder = TrajectoryBuilder(N, T, K, lambda k: Trajectories(k, T, ((2,), torch.float32), (), torch.long, "cpu"),
                                free.get_nowait, emitted.append)  # fmt: skip
    t = torch.zeros(N, dtype=torch.long)  # stream step of each env's next observation
    end_at = lambda e, s: (e * 7 + s * 3) % 11 == 0  # noqa: E731 - the step s of env e ends an episode
    first = True
    for _ in range(200):
        ids = torch.arange(N) if first else torch.randperm(N, generator=g)[: int(torch.randint(1, N + 1, (1,),
                                                                                             generator=g))]  # fmt: skip
        # The results of the envs' previous steps (rewards and ends of step t - 1) and their observations at t.
        prev = t[ids] - 1
        rewards = (ids * 100 + prev).float()
        ends = torch.tensor([bool(end_at(int(e), int(s))) for e, s in zip(ids, prev)])
        terminated, truncated = ends & (ids % 2 == 0), ends & (ids % 2 == 1)
        builder.observe(ids.int(), encode(ids, t[ids]), rewards, terminated, truncated)
        builder.act(ids.int(), encode(ids, t[ids]), ids * 1000 + t[ids], -(t[ids].float()), version=int(t[ids].max()))
        t[ids] += 1
        first = False
    assert len(emitted) >= 5
    seen = {e: [] for e in range(N)}
    for batch in emitted:
        for k in range(K):
            env = int(batch.obs[k, 0, 0])
            steps = batch.obs[k, :, 1].long()
            assert (batch.obs[k, :, 0] == env).all()
            assert torch.equal(steps, steps[0] + torch.arange(T + 1)), steps  # T steps and the observation after
            assert steps[0] % T == 0
            seen[env].append(int(steps[0]))
            assert torch.equal(batch.actions[k], env * 1000 + steps[:T])
            assert torch.equal(batch.logprobs[k], -steps[:T].float())
            assert torch.equal(batch.rewards[k], (env * 100 + steps[:T]).float())
            ends = torch.tensor([bool(end_at(env, int(s))) for s in steps[:T]])
            assert torch.equal(batch.terminated[k] | batch.truncated[k], ends)
            assert not (batch.terminated[k] & batch.truncated[k]).any()
            ended_before = torch.tensor([bool(int(s) > 0 and end_at(env, int(s) - 1)) for s in steps[:T]])
            assert torch.equal(batch.reset[k], ended_before)  # the step after an end is the pool's reset step
    for env, starts in seen.items():  # every env's trajectories, each once, in its own order
        assert starts == list(range(0, T * len(starts), T)), (env, starts)


def test_weights_immediate_and_alternating():
    agent = MLPAgent(4, 2)
    stop = threading.Event()
    w = PublishedWeights(agent, alternating=False, stop=stop)
    with torch.no_grad():
        agent.actor[0].weight.add_(1.0)
    assert not torch.equal(w.acting.actor[0].weight, agent.actor[0].weight)
    w.publish(agent, 3, end_of_batch=False)
    assert torch.equal(w.acting.actor[0].weight, agent.actor[0].weight) and w.version == 3
    assert not w.acting.actor[0].weight.requires_grad

    # Alternating: rollouts 1 and 2 act with the initial weights, rollout i with those after batch i - 2.
    w = PublishedWeights(agent, alternating=True, stop=stop)
    initial = agent.actor[0].weight.clone()
    w.start_rollout()
    w.start_rollout()
    assert torch.equal(w.acting.actor[0].weight, initial)
    with torch.no_grad():
        agent.actor[0].weight.add_(1.0)
    w.publish(agent, 5, end_of_batch=False)  # mid-batch: nothing
    assert torch.equal(w.acting.actor[0].weight, initial)
    w.publish(agent, 6, end_of_batch=True)
    after_batch_1 = agent.actor[0].weight.clone()
    with torch.no_grad():
        agent.actor[0].weight.add_(1.0)
    w.start_rollout()  # rollout 3: batch 1's weights, not the learner's newer ones
    assert torch.equal(w.acting.actor[0].weight, after_batch_1) and w.version == 6
    stop.set()
    with pytest.raises(Stopped):
        w.start_rollout()  # nothing published: a stopping run does not wait forever


@pytest.mark.parametrize("alternating", [False, True])
def test_published_weights_carry_the_pixel_statistics(alternating):
    """--normalize-frames: the sampler's copy gets the learner's per-pixel statistics (buffers) with its weights, so
    it normalizes the frames it acts on as the learner does."""
    agent = NatureCNNAgent(4, 6, normalize=True)
    w = PublishedWeights(agent, alternating=alternating, stop=threading.Event())
    for _ in range(2 if alternating else 0):
        w.start_rollout()
    agent.network.observe(torch.randint(0, 256, (5, 4, 84, 84), dtype=torch.uint8))
    w.publish(agent, 1, end_of_batch=True)
    w.start_rollout()
    for name in ("pixel_mean", "pixel_var", "pixel_count"):
        assert torch.equal(getattr(w.acting.network, name), getattr(agent.network, name)), name
    x = torch.randint(0, 256, (3, 4, 84, 84), dtype=torch.uint8)
    with torch.no_grad():
        torch.testing.assert_close(w.acting.get_value(x), agent.get_value(x), rtol=0, atol=0)


def test_sampler_exception_surfaces_in_the_learner_and_nothing_hangs():
    args = Args(env_id="CartPole-v1", num_envs=4, trajectory_length=4, batch_size=16)
    envs = rlfast.make("CartPole-v1", 4, batch_size=2, seed=0)
    calls = []

    def failing(ids, *_):
        calls.append(1)
        if len(calls) == 30:
            raise RuntimeError("boom in the sampler")

    agent = MLPAgent(4, 2)
    with pytest.raises(RuntimeError, match="boom in the sampler"):
        with Sampler(envs, args, agent, failing, torch.device("cpu")) as sampler:
            while True:
                sampler.release(sampler.next_batch())
    envs.close()


def test_sampler_hands_on_full_batches_and_stops_when_the_learner_does():
    args = Args(env_id="CartPole-v1", num_envs=8, trajectory_length=8, batch_size=32, queue_size=1)
    envs = rlfast.make("CartPole-v1", 8, batch_size=4, seed=0)
    episodes = Episodes(8, atari=False)
    with Sampler(envs, args, MLPAgent(4, 2), episodes.collect, torch.device("cpu")) as sampler:
        batches = [sampler.next_batch() for _ in range(3)]  # not released: the sampler must wait, not overwrite
        assert len({id(b) for b in batches}) == 3
        obs = torch.stack([b.obs for b in batches])
        assert obs.shape == (3, 4, 9, 4) and obs.abs().sum() > 0
    assert not sampler._thread.is_alive()  # left the with: stopped and joined while blocked on the full queue
    done, returns, lengths = episodes.take()
    assert done.shape == returns.shape == lengths.shape and done.all()
    envs.close()


def test_loss_leaves_reset_steps_out():
    torch.manual_seed(0)
    agent = MLPAgent(3, 2)
    args = Args(trajectory_length=4)
    batch = Trajectories(2, 4, ((3,), torch.float32), (), torch.long, "cpu")
    batch.obs.normal_()
    batch.actions.random_(0, 2)
    batch.rewards.normal_()
    batch.logprobs.fill_(-0.7)
    mb = batch.rows(torch.arange(2))
    # Trajectory 0 terminates at row 1, so row 2 is the pool's reset step: its reward and action change nothing.
    mb["terminated"][0, 1] = True
    mb["reset"][0, 2] = True
    before = appo_loss(agent, args, mb)
    mb["rewards"][0, 2] += 100.0
    mb["actions"][0, 2] = 1 - mb["actions"][0, 2]
    after = appo_loss(agent, args, mb)
    torch.testing.assert_close(after.loss, before.loss)
    torch.testing.assert_close(after.value_loss, before.value_loss)
    mb["reset"][0, 2] = False  # were it a real step, they would
    assert not torch.allclose(appo_loss(agent, args, mb).loss, after.loss)


def test_update_kl_is_ppos_approx_kl_from_the_reference_weights_over_real_steps():
    torch.manual_seed(0)
    agent = MLPAgent(3, 4)
    batch = Trajectories(3, 5, ((3,), torch.float32), (), torch.long, "cpu")
    batch.obs.normal_()
    batch.actions.random_(0, 4)
    probe = batch.rows(torch.arange(3))
    reference = taken_logprobs(agent, probe)
    assert reference.shape == (15,) and not reference.requires_grad
    assert update_kl(agent, probe, reference).item() == 0.0  # the same weights: nothing moved
    with torch.no_grad():
        for p in agent.actor.parameters():
            p.add_(torch.randn_like(p))
    logits = agent.actor(probe["obs"][:, :5].flatten(0, 1))
    logratio = torch.log_softmax(logits, -1).gather(1, probe["actions"].flatten()[:, None])[:, 0] - reference
    per_step = (logratio.exp() - 1) - logratio
    torch.testing.assert_close(update_kl(agent, probe, reference), per_step.mean())
    probe["reset"][1, 2] = True  # a reset step is not a step of the policy: left out
    keep = torch.ones(15, dtype=torch.bool)
    keep[1 * 5 + 2] = False
    torch.testing.assert_close(update_kl(agent, probe, reference), per_step[keep].mean())


def test_a_dict_envs_observations_are_stored_key_by_key_as_a_tensor_would_be():
    """The builder fed the same async stream twice, once with tensor observations and once with a Dict env's (two
    keys of two dtypes): every batch holds, per key, what the tensor one holds; ``rows`` gives the dict too."""
    N, T, K = 5, 4, 3
    spec = {"screen": ((2,), torch.uint8), "vector": ((2,), torch.float32)}
    outs = {"tensor": [], "dict": []}
    builders = {
        "tensor": TrajectoryBuilder(N, T, K, lambda k: Trajectories(k, T, ((2,), torch.float32), (), torch.long, "cpu"),
                                    lambda: Trajectories(K, T, ((2,), torch.float32), (), torch.long, "cpu"),
                                    outs["tensor"].append),
        "dict": TrajectoryBuilder(N, T, K, lambda k: Trajectories(k, T, spec, (), torch.long, "cpu"),
                                  lambda: Trajectories(K, T, spec, (), torch.long, "cpu"), outs["dict"].append),
    }  # fmt: skip
    g = torch.Generator().manual_seed(1)
    t = torch.zeros(N, dtype=torch.long)
    for i in range(80):
        ids = torch.arange(N) if i == 0 else torch.randperm(N, generator=g)[:3]
        obs = encode(ids, t[ids])
        ends = (ids + t[ids]) % 5 == 0
        for name, builder in builders.items():
            o = obs if name == "tensor" else {"screen": obs.to(torch.uint8), "vector": obs * 10}
            builder.observe(ids.int(), o, torch.ones(len(ids)), ends, torch.zeros(len(ids), dtype=torch.bool))
            builder.act(ids.int(), o, ids, torch.zeros(len(ids)), version=i)
        t[ids] += 1
    assert len(outs["dict"]) == len(outs["tensor"]) >= 5
    for plain, keyed in zip(outs["tensor"], outs["dict"]):
        assert keyed.obs["screen"].dtype == torch.uint8 and keyed.obs["screen"].shape == (K, T + 1, 2)
        assert torch.equal(keyed.obs["screen"], plain.obs.to(torch.uint8)) and torch.equal(keyed.obs["vector"],
                                                                                             plain.obs * 10)
        assert torch.equal(keyed.actions, plain.actions) and torch.equal(keyed.reset, plain.reset)
    rows = outs["dict"][0].rows(torch.tensor([2, 0]))
    assert torch.equal(rows["obs"]["vector"], outs["dict"][0].obs["vector"][[2, 0]])
