"""continuous.py: the diagonal Gaussian against torch.distributions.Normal, and ObsRewardNormalizer
against gymnasium's wrappers fed the same observation / reward / terminated / truncated stream:
its vector wrappers (shared statistics) and CleanRL's exact per-env stack, both with next-step
autoreset, episode ends (terminations and truncations) and reset steps included.

Tolerances: outputs are float32 on both sides, from float64 statistics computed in a slightly
different order (batch moments vs numpy's): 1e-5 relative.
"""

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch.distributions import Normal

from rlfast.algos.continuous import ObsRewardNormalizer, diag_normal

TASK = "Hopper-v5"
MAX_STEPS = 20  # short episodes: random-action falls end some (terminated), the time limit others


def test_diag_normal_matches_torch_normal():
    gen = torch.Generator().manual_seed(0)
    mean = torch.randn(5, 3, generator=gen, requires_grad=True)
    logstd = torch.randn(1, 3, generator=gen, requires_grad=True)
    torch.manual_seed(7)
    action, logprob, entropy = diag_normal(mean, logstd.expand_as(mean))
    ref = Normal(mean, logstd.exp().expand_as(mean))
    torch.manual_seed(7)
    assert torch.equal(action, ref.sample())  # the same draws from the same RNG state
    assert not action.requires_grad
    torch.testing.assert_close(logprob, ref.log_prob(action).sum(1))
    torch.testing.assert_close(entropy, ref.entropy().sum(1))
    # Scoring given actions carries gradients to the mean and the log std, like Normal's.
    given = torch.randn(5, 3, generator=gen)
    _, lp, ent = diag_normal(mean, logstd.expand_as(mean), given)
    (lp.sum() + ent.sum()).backward()
    grads = (mean.grad.clone(), logstd.grad.clone())
    mean.grad, logstd.grad = None, None
    ref = Normal(mean, logstd.exp().expand_as(mean))
    (ref.log_prob(given).sum() + ref.entropy().sum()).backward()
    torch.testing.assert_close(grads[0], mean.grad)
    torch.testing.assert_close(grads[1], logstd.grad)


class RecordRaw(gym.Wrapper):
    """Keeps the raw observation and reward of the last reset or step (reward 0 after a reset)."""

    def reset(self, **kwargs):
        obs, info = super().reset(**kwargs)
        self.last_obs, self.last_reward = obs, 0.0
        return obs, info

    def step(self, action):
        obs, reward, terminated, truncated, info = super().step(action)
        self.last_obs, self.last_reward = obs, float(reward)
        return obs, reward, terminated, truncated, info


class RecordRawVector(gym.vector.VectorWrapper):
    """RecordRaw for a vector env (its reset steps already return reward 0)."""

    def reset(self, **kwargs):
        obs, info = super().reset(**kwargs)
        self.last_obs, self.last_reward = obs, np.zeros(self.num_envs)
        return obs, info

    def step(self, actions):
        obs, reward, terminated, truncated, info = super().step(actions)
        self.last_obs, self.last_reward = obs, reward
        return obs, reward, terminated, truncated, info


def cleanrl_env(gamma):
    """CleanRL's ppo_continuous_action.py stack for one env, with RecordRaw under it."""
    env = RecordRaw(gym.make(TASK, max_episode_steps=MAX_STEPS))
    env = gym.wrappers.RecordEpisodeStatistics(env)
    env = gym.wrappers.ClipAction(env)
    env = gym.wrappers.NormalizeObservation(env)
    env = gym.wrappers.TransformObservation(env, lambda obs: np.clip(obs, -10, 10), env.observation_space)
    env = gym.wrappers.NormalizeReward(env, gamma=gamma)
    return gym.wrappers.TransformReward(env, lambda reward: np.clip(reward, -10, 10))


def vector_stack(num_envs, gamma):
    """gymnasium's vector wrappers (shared statistics) over a next-step-autoreset vector env."""
    base = gym.make_vec(TASK, num_envs=num_envs, vectorization_mode="sync", max_episode_steps=MAX_STEPS,
                        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP})  # fmt: skip
    raw = RecordRawVector(base)
    env = gym.wrappers.vector.NormalizeObservation(raw)
    env = gym.wrappers.vector.TransformObservation(env, lambda obs: np.clip(obs, -10, 10))
    env = gym.wrappers.vector.NormalizeReward(env, gamma=gamma)
    return gym.wrappers.vector.TransformReward(env, lambda reward: np.clip(reward, -10, 10)), raw


@pytest.mark.parametrize("stack", ["cleanrl_per_env", "gymnasium_vector"])
def test_obs_reward_normalizer_matches_gymnasium_wrappers(stack):
    gamma = 0.99
    if stack == "cleanrl_per_env":  # CleanRL's default num_envs=1: per-env statistics are the shared ones
        n = 1
        env = gym.vector.SyncVectorEnv([lambda: cleanrl_env(gamma)], autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP)

        def raw_stream():
            inner = env.envs[0]
            while not isinstance(inner, RecordRaw):
                inner = inner.env
            return inner.last_obs[None], np.array([inner.last_reward])
    else:
        n = 3
        env, raw = vector_stack(n, gamma)

        def raw_stream():
            return raw.last_obs, raw.last_reward

    ours = ObsRewardNormalizer(env.single_observation_space.shape, n, gamma)
    want_obs, _ = env.reset(seed=0)
    got_obs = ours.observations(torch.from_numpy(raw_stream()[0]))
    np.testing.assert_allclose(got_obs.numpy(), want_obs, rtol=1e-5, atol=1e-5)
    rng = np.random.default_rng(0)
    terminations = truncations = reward_clipped = 0
    for _ in range(300):
        want_obs, want_reward, terminated, truncated, _ = env.step(rng.uniform(-1.5, 1.5, size=(n, 3)))
        raw_obs, raw_reward = raw_stream()
        got_obs = ours.observations(torch.from_numpy(raw_obs))
        term, trunc = torch.from_numpy(terminated), torch.from_numpy(truncated)
        got_reward = ours.rewards(torch.from_numpy(np.asarray(raw_reward, dtype=np.float32)), term, trunc)
        assert got_obs.dtype == torch.float32 and got_reward.dtype == torch.float32
        np.testing.assert_allclose(got_obs.numpy(), want_obs, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got_reward.numpy(), want_reward, rtol=1e-5, atol=1e-6)
        terminations += int(terminated.sum())
        truncations += int((truncated & ~terminated).sum())
        reward_clipped += int((got_reward.abs() == 10).any())
    assert terminations >= 3 and truncations >= 3, (terminations, truncations)
    assert reward_clipped > 0  # the clip is exercised (early on, the return variance is tiny)
    env.close()


def test_new_episodes_and_state_round_trip():
    norm = ObsRewardNormalizer((2,), 2, gamma=0.9)
    for _ in range(5):
        norm.observations(torch.randn(2, 2, dtype=torch.float64))
        norm.rewards(torch.rand(2), torch.tensor([False, True]), torch.tensor([False, False]))
    state = {k: n.state_dict() for k, n in norm.normalizers().items()}
    other = ObsRewardNormalizer((2,), 2, gamma=0.5)
    for key, n in other.normalizers().items():
        n.load_state_dict(state[key])
    assert other.reward.gamma == 0.9 and torch.equal(other.obs.rms.var, norm.obs.rms.var)
    assert other.reward.returns.abs().sum() > 0
    other.new_episodes()
    assert torch.equal(other.reward.returns, torch.zeros(2)) and not other.reward.prev_dones.any()
    assert torch.equal(other.reward.rms.var, norm.reward.rms.var)  # the statistics are kept


def vector_envs(num_envs: int, groups: int):
    """VectorEnvs of Hopper-v5 (episodes of at most MAX_STEPS) on the CPU, built on the few things of a Run it uses."""
    from types import SimpleNamespace

    import rlfast
    from rlfast.algos.continuous import VectorEnvs
    from rlfast.algos.distributed import World

    def make_env(n, *, num_threads, seed):
        return rlfast.make(TASK, n, num_threads=num_threads, seed=seed, max_episode_steps=MAX_STEPS)

    run = SimpleNamespace(make_env=make_env, world=World(), env_seed=3, device=torch.device("cpu"))
    return VectorEnvs(run, num_envs, groups, num_threads=groups, rows=1)


def test_env_groups_step_one_pools_envs_and_keep_its_statistics():
    """VectorEnvs in 2 groups of 3 against one pool of 6, the same actions: each env's raw trajectory is the same
    (episode ends, raw returns); the statistics, counted group by group, end each step where one pool's do (Chan's
    rule combines the two batches into the whole step's: float64, to its rounding); the last group, normalized
    with the whole step counted, gets one pool's observations and rewards; the first group's observations are
    normalized with only its own counted (VectorEnvs' docstring), so they differ, a little."""
    one, two = vector_envs(6, 1), vector_envs(6, 2)
    try:
        assert [p.num_envs for p in two.pools] == [3, 3] and two.groups == [slice(0, 3), slice(3, 6)]
        torch.testing.assert_close(two.reset(), one.reset(), rtol=1e-5, atol=1e-5)
        gen = torch.Generator().manual_seed(0)
        first_apart, ends = 0.0, 0
        for step in range(3 * MAX_STEPS):
            action = torch.rand((6, *one.single_action_space.shape), generator=gen) * 2 - 1
            one.send(action)
            obs1, rew1, done1, term1 = (t.clone() for t in one.recv(0))
            for g in two.groups:
                two.send(action[g], g)
            results = [tuple(t.clone() for t in two.recv(0, g)) for g in two.groups]
            obs2, rew2, done2, term2 = (torch.cat(parts) for parts in zip(*results))
            assert torch.equal(done2, done1) and torch.equal(term2, term1), step
            assert torch.equal(two.episodes.table[1], one.episodes.table[1]), step  # raw returns of the ended ones
            for a, b in [(two.norm.obs.rms, one.norm.obs.rms), (two.norm.reward.rms, one.norm.reward.rms)]:
                torch.testing.assert_close(a.count, b.count, rtol=0, atol=0)
                torch.testing.assert_close(a.mean, b.mean, rtol=1e-10, atol=1e-12)
                torch.testing.assert_close(a.var, b.var, rtol=1e-10, atol=1e-12)
            torch.testing.assert_close(two.norm.reward.returns, one.norm.reward.returns, rtol=1e-6, atol=1e-6)
            torch.testing.assert_close(obs2[3:], obs1[3:], rtol=1e-5, atol=1e-5)
            torch.testing.assert_close(rew2[3:], rew1[3:], rtol=1e-5, atol=1e-6)
            first_apart = max(first_apart, (obs2[:3] - obs1[:3]).abs().max().item())
            ends += int(done1.sum())
        assert ends > 6  # episodes ended (and restarted) along the way
        assert first_apart > 1e-4  # the first group's normalization does differ (statistics without the second)
    finally:
        for pool in one.pools + two.pools:
            pool.close()
