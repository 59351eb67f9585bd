"""ReplayBuffer (rlfast/algos/replay.py) against a naive reference that stores every transition whole.

The reference is the acting side itself: ``rlfast.FrameStack`` builds each env's stacks as a trainer
sees them, and every real transition is recorded as (stack before, action, reward, stack after,
terminated). Streams come from a simulated pool with next-step autoreset and Atari's episodic life
(a life lost terminates an episode but continues the game and its stack), random truncations,
sync and async (env subsets) stepping, and rings small enough to wrap many times. For every slot the
buffer calls valid, ``get`` must equal the reference exactly; the valid slots must be exactly the
reference's transitions still held; samples must come only from them, all of them. n-step
transitions are checked against the reference's one-step ones, chained by hand.
A real Breakout pool is checked the same way.
"""

import pytest
import torch

import rlfast
from rlfast.algos.replay import ReplayBuffer, format_bytes

FRAME = (1, 3, 2)


class FakePool:
    """Per-env streams with the pool's next-step autoreset: the step after an episode end is a reset
    step (reward 0, no end) whose observation starts a new game unless the end was a life lost."""

    def __init__(self, num_envs, seed, p_term=0.12, p_game_over=0.4, p_trunc=0.04):
        self.g = torch.Generator().manual_seed(seed)
        self.n = num_envs
        self.p = (p_term, p_game_over, p_trunc)
        self.ended = torch.zeros(num_envs, dtype=torch.bool)
        self.game_over = torch.zeros(num_envs, dtype=torch.bool)

    def reset(self):
        return self.frames(self.n), torch.ones(self.n, dtype=torch.bool)

    def frames(self, b):
        return torch.randint(0, 256, (b, *FRAME), generator=self.g, dtype=torch.uint8)

    def step(self, ids):
        """Results of one step of envs ``ids``: (frames, reward, terminated, truncated, new_game)."""
        b = len(ids)
        u = torch.rand(b, 4, generator=self.g)
        resetting = self.ended[ids]
        term = (u[:, 0] < self.p[0]) & ~resetting
        trunc = (u[:, 2] < self.p[2]) & ~resetting & ~term
        game_over = term & (u[:, 1] < self.p[1])
        new_game = resetting & self.game_over[ids]
        reward = torch.where(resetting, 0.0, torch.randn(b, generator=self.g))
        self.ended[ids] = term | trunc
        self.game_over[ids] = game_over | trunc
        return self.frames(b), reward, term, trunc, new_game


def run_streams(num_envs, per_env, steps, stack, seed, async_batches=False, n_step=1, gamma=0.9, device="cpu"):
    """Feeds a buffer (on ``device``) and the reference (on the host) side by side; returns (buffer,
    {(env, t): one-step transition}, counts)."""
    pool = FakePool(num_envs, seed)
    rb = ReplayBuffer(per_env * num_envs, num_envs, FRAME, torch.uint8, stack=stack, n_step=n_step, gamma=gamma,
                      device=device)
    acting = rlfast.FrameStack(num_envs, stack, FRAME)
    frames, new_game = pool.reset()
    all_ids = torch.arange(num_envs)
    obs = acting.update(frames, all_ids, new_game)  # [N, stack * 1, 3, 2]: what the policy sees
    frame, first = frames.clone(), new_game.clone()
    t = torch.zeros(num_envs, dtype=torch.long)
    terminal = torch.zeros(num_envs, dtype=torch.bool)  # the env's current obs ended an episode
    reference = {}
    g = torch.Generator().manual_seed(seed + 1)
    for _ in range(steps):
        ids = all_ids
        if async_batches:
            size = int(torch.randint(1, num_envs + 1, (1,), generator=g))
            ids = all_ids[torch.randperm(num_envs, generator=g)[:size]]
        actions = torch.randint(0, 6, (len(ids),), generator=g)
        nframes, reward, term, trunc, ngame = pool.step(ids)
        rb.add(frame[ids], actions, reward, term, trunc, first[ids], env_ids=None if not async_batches else ids)
        next_obs = acting.update(nframes, ids, ngame)
        for i, e in enumerate(ids.tolist()):
            if not terminal[e]:
                reference[(e, int(t[e]))] = (obs[e].clone(), int(actions[i]), float(reward[i]), next_obs[i].clone(),
                                             float(term[i]), bool(trunc[i]))  # fmt: skip
        obs[ids], frame[ids], first[ids] = next_obs, nframes, ngame
        terminal[ids] = term | trunc
        t[ids] += 1
    return rb, reference, t


def n_step_transition(reference, e, t, n_step, gamma):
    """The n-step transition from (e, t), chained from the reference's one-step ones by hand:
    (obs, action, return, next_obs, done, discount)."""
    obs, action = reference[(e, t)][:2]
    ret = 0.0
    for i in range(n_step):
        _, _, reward, next_obs, terminated, truncated = reference[(e, t + i)]
        ret += gamma**i * reward
        if terminated or truncated:
            break
    return obs, action, ret, next_obs, terminated, gamma ** (i + 1)


def check_against_reference(rb, reference, counts):
    valid = rb.valid()
    flat = valid.reshape(-1).nonzero().squeeze(1)
    got = {k: v.cpu() for k, v in rb.get(flat).items()}
    seen = set()
    for i in range(len(flat)):
        key = (int(got["env_ids"][i]), int(got["steps"][i]))
        seen.add(key)
        obs, action, ret, next_obs, done, discount = n_step_transition(reference, *key, rb.n_step, rb.gamma)
        assert torch.equal(got["obs"][i], obs), key
        assert torch.equal(got["next_obs"][i], next_obs), key
        assert (int(got["actions"][i]), float(got["dones"][i])) == (action, done), key
        if rb.n_step == 1:
            assert float(got["rewards"][i]) == ret, key  # the stored reward itself
        else:
            assert float(got["rewards"][i]) == pytest.approx(ret, rel=1e-5, abs=1e-6), key
        assert float(got["discounts"][i]) == pytest.approx(discount, rel=1e-6), key
    # Exactly the reference's transitions still held: the ring's last per_env steps, less the n_step newest
    # (still waiting for the steps they look ahead to) and, once wrapped, the stack - 1 oldest (their older
    # frames are gone).
    held = set()
    for (e, t), _ in reference.items():
        n = int(counts[e])
        oldest = max(n - rb.per_env, 0) + (rb.stack - 1 if n > rb.per_env else 0)
        if oldest <= t and t + rb.n_step <= n - 1:
            held.add((e, t))
    assert seen == held
    return seen


@pytest.mark.parametrize("stack", [1, 4])
@pytest.mark.parametrize("async_batches", [False, True], ids=["sync", "async"])
def test_equals_a_reference_that_stores_whole_transitions(stack, async_batches):
    for seed, steps in ((0, 9), (1, 40), (2, 300)):  # before, around and long after the rings wrap (16 slots)
        rb, reference, counts = run_streams(5, 16, steps, stack, seed, async_batches)
        seen = check_against_reference(rb, reference, counts)
        if steps > 16:
            assert any(t >= 16 for _, t in seen), "the rings should have wrapped"


@pytest.mark.parametrize("n_step", [2, 3, 5])
@pytest.mark.parametrize("async_batches", [False, True], ids=["sync", "async"])
def test_n_step_returns_equal_the_reference_chained_by_hand(n_step, async_batches):
    dones = discounts = 0
    for seed, steps in ((3, 12), (4, 60), (5, 300)):
        rb, reference, counts = run_streams(5, 16, steps, 4, seed, async_batches, n_step=n_step)
        check_against_reference(rb, reference, counts)
        got = rb.get(rb.valid().reshape(-1).nonzero().squeeze(1))
        dones += int(got["dones"].sum())
        cut_by_truncation = (got["discounts"] > 0.9**n_step + 1e-6) & (got["dones"] == 0)  # gamma^k, k < n
        discounts += int(cut_by_truncation.sum())
    assert dones > 0 and discounts > 0, (dones, discounts)  # both ways of ending early were exercised


@pytest.mark.parametrize("path", ["windows", "rank"])
def test_samples_come_uniformly_from_the_valid_transitions(path):
    # "windows": the CPU's draw from each env's window of stream times, reset steps redrawn; "rank": the rank-th
    # valid slot (other devices, and the CPU's last resort)
    rb, reference, counts = run_streams(4, 32, 200, 4, seed=7)
    valid = rb.valid().reshape(-1)
    lo, hi = rb._windows()
    assert int((hi - lo + 1).clamp(min=0).sum()) > int(valid.sum())  # reset steps in the windows: some redraws
    g = torch.Generator().manual_seed(0)
    draw = rb.sample_indices if path == "windows" else rb._rank_sample
    flat = torch.cat([draw(100, generator=g) for _ in range(2000)])
    assert valid[flat].all()
    hits = torch.bincount(flat, minlength=valid.numel())[valid].float()
    assert (hits > 0).all()  # every valid transition can be drawn
    expected = 200_000 / int(valid.sum())
    assert ((hits - expected).abs() / expected).max() < 0.15, (hits.min(), hits.max(), expected)  # ~2060 each, sd ~45
    batch = rb.sample(64)
    assert batch["obs"].shape == (64, 4, 3, 2) and batch["next_obs"].shape == (64, 4, 3, 2)
    assert batch["obs"].dtype == torch.uint8 and batch["dones"].dtype == torch.float32


@pytest.mark.cuda
def test_on_cuda_equals_the_reference_and_samples_only_valid_slots():
    for n_step, async_batches in ((1, False), (3, True)):
        rb, reference, counts = run_streams(5, 16, 300, 4, 8, async_batches, n_step=n_step, device="cuda")
        assert rb.obs.is_cuda
        check_against_reference(rb, reference, counts)
        valid = rb.valid().reshape(-1)
        flat = torch.cat([rb.sample_indices(100) for _ in range(500)])  # the rank path, on the device
        assert flat.is_cuda and valid[flat].all()
        hits = torch.bincount(flat, minlength=valid.numel())[valid]
        assert (hits > 0).all()  # ~50,000 draws over < 60 valid slots reach every one
        batch = rb.sample(64)
        assert batch["obs"].is_cuda and batch["obs"].shape == (64, 4, 3, 2) and batch["dones"].dtype == torch.float32


def test_breakout_pool_with_episodic_life_matches_the_reference():
    # A real pool: life losses (terminated, the game and its stack go on), game overs and truncations by a short
    # max_episode_steps, and rings that wrap. The reference stacks come from the pool's own stack_num=4 obs.
    n, per_env = 3, 40
    frames_pool = rlfast.make("Breakout-v5", n, seed=3, stack_num=1, episodic_life=True, max_episode_steps=60)
    stacked_pool = rlfast.make("Breakout-v5", n, seed=3, stack_num=4, episodic_life=True, max_episode_steps=60)
    rb = ReplayBuffer(per_env * n, n, (1, 84, 84), torch.uint8, stack=4)
    frame, info = frames_pool.reset()
    obs, _ = stacked_pool.reset()
    frame, first, obs = frame.clone(), info["new_game"].clone(), obs.clone()
    terminal = torch.zeros(n, dtype=torch.bool)
    reference, g = {}, torch.Generator().manual_seed(0)
    ends = 0
    for t in range(150):
        actions = torch.randint(0, 4, (n,), generator=g)
        nframe, reward, term, trunc, info = frames_pool.step(actions)
        nobs, _, _, _, _ = stacked_pool.step(actions)
        rb.add(frame, actions, reward, term, trunc, first)
        for e in range(n):
            if not terminal[e]:
                reference[(e, t)] = (obs[e].clone(), int(actions[e]), float(reward[e]), nobs[e].clone(), float(term[e]),
                                     bool(trunc[e]))  # fmt: skip
        ends += int((term | trunc).sum())
        frame, first, obs = nframe.clone(), info["new_game"].clone(), nobs.clone()
        terminal = term | trunc
    assert ends >= 3
    check_against_reference(rb, reference, torch.full((n,), 150))


def test_vector_observations_and_continuous_actions():
    rb = ReplayBuffer(100, 2, (3,), torch.float32, action_shape=(2,), action_dtype=torch.float32)
    for t in range(10):
        rb.add(torch.full((2, 3), float(t)), torch.full((2, 2), t + 0.5), torch.tensor([t, -t]),
               torch.tensor([t == 4, False]), torch.zeros(2, dtype=torch.bool))  # fmt: skip
    valid = rb.valid()
    assert valid.sum() == 8 + 9 - 0 and not valid[0, 5]  # env 0: the step from its terminal obs (t=5) is a reset step
    batch = rb.get(torch.tensor([4, 50 + 7]))  # env 0 step 4 (terminated), env 1 step 7
    assert torch.equal(batch["obs"], torch.tensor([[4.0] * 3, [7.0] * 3]))
    assert torch.equal(batch["next_obs"], torch.tensor([[5.0] * 3, [8.0] * 3]))
    assert batch["actions"].tolist() == [[4.5, 4.5], [7.5, 7.5]] and batch["rewards"].tolist() == [4.0, -7.0]
    assert batch["dones"].tolist() == [1.0, 0.0]


def test_memory_of_a_million_atari_transitions():
    rb = ReplayBuffer(1_000_000, 8, (1, 84, 84), torch.uint8, stack=4, device="meta")  # sizes without allocating
    frames = 1_000_000 * 84 * 84
    assert frames <= rb.nbytes <= frames + 20_000_000  # the frames (7.06 GB) and 16 bytes per slot
    assert format_bytes(rb.nbytes) == "7.07 GB"


def test_bad_input_is_a_clear_error():
    rb = ReplayBuffer(64, 2, (1, 3, 2), torch.uint8, stack=4)
    no = torch.zeros(2, dtype=torch.bool)
    ok = dict(actions=torch.zeros(2, dtype=torch.long), rewards=torch.zeros(2), terminated=no, truncated=no)
    with pytest.raises(ValueError, match=r"obs has shape \(2, 3, 2\); expected \(2, 1, 3, 2\)"):
        rb.add(torch.zeros(2, 3, 2, dtype=torch.uint8), **ok)
    with pytest.raises(ValueError, match="obs has dtype torch.float32; expected torch.uint8"):
        rb.add(torch.zeros(2, 1, 3, 2), **ok)
    with pytest.raises(ValueError, match=r"add\(\) got 3 observations for 2 envs; pass env_ids"):
        rb.add(torch.zeros(3, 1, 3, 2, dtype=torch.uint8), **{k: torch.cat([v, v[:1]]) for k, v in ok.items()})
    with pytest.raises(ValueError, match=r"rewards has shape \(3,\); expected \(2,\)"):
        rb.add(torch.zeros(2, 1, 3, 2, dtype=torch.uint8), **{**ok, "rewards": torch.zeros(3)})
    with pytest.raises(ValueError, match="cannot sample 1 transitions: the buffer holds at most 0"):
        rb.sample(1)
    for _ in range(3):
        rb.add(torch.zeros(2, 1, 3, 2, dtype=torch.uint8), **ok)
    with pytest.raises(ValueError, match="cannot sample 5 transitions: the buffer holds at most 4"):
        rb.sample(5)
    assert rb.sample(4)["obs"].shape == (4, 4, 3, 2)
    with pytest.raises(ValueError, match="needs at least stack \\+ n_step \\+ 1 = 6 per env"):
        ReplayBuffer(10, 2, (1,), stack=4)
    with pytest.raises(ValueError, match="needs at least stack \\+ n_step \\+ 1 = 8 per env"):
        ReplayBuffer(14, 2, (1,), stack=4, n_step=3)
    with pytest.raises(ValueError, match=r"gamma must be in \[0, 1\], got 1.5"):
        ReplayBuffer(64, 2, (1,), gamma=1.5)


def test_state_dict_round_trip_goes_on_with_new_streams(tmp_path):
    # A saved and reloaded buffer holds the same transitions; each env's newest slot (its next observation never
    # came: a resumed run's pool starts fresh episodes) is no transition, and the new streams' stacks start at
    # their own first frame even where add() is told of no game start.
    rb, reference, counts = run_streams(3, 64, 40, 4, seed=11, n_step=2)
    torch.save(rb.state_dict(), tmp_path / "rb.pt")
    loaded = ReplayBuffer(3 * 64, 3, FRAME, torch.uint8, stack=4, n_step=2, gamma=0.9)
    loaded.load_state_dict(torch.load(tmp_path / "rb.pt", weights_only=True))
    old = rb.valid().reshape(-1).nonzero().squeeze(1)
    assert torch.equal(loaded.valid(), rb.valid())
    for key in ("obs", "next_obs", "rewards", "dones", "discounts", "actions"):
        assert torch.equal(loaded.get(old)[key], rb.get(old)[key]), key
    pool = FakePool(3, seed=12, p_term=0.0, p_trunc=0.0)
    frames, _ = pool.reset()
    for t in range(5):
        nframes, reward, term, trunc, _ = pool.step(torch.arange(3))
        loaded.add(frames, torch.full((3,), t), reward, term, trunc)  # first=None: nothing said about games
        if t == 0:
            reset_frames = frames.clone()
        frames = nframes
    newest = (counts - 1) % 64  # the old streams' last slots: never transitions
    assert not loaded.valid()[torch.arange(3), newest].any()
    # The slot before it now ends its episode: a one-step transition to the newest observation.
    cut = loaded.get(torch.arange(3) * 64 + (counts - 2) % 64)
    for e in range(3):
        obs, action, reward, next_obs, terminated, _ = reference[(e, int(counts[e]) - 2)]
        assert torch.equal(cut["obs"][e], obs) and torch.equal(cut["next_obs"][e], next_obs)
        assert (float(cut["rewards"][e]), float(cut["dones"][e])) == (reward, terminated)
        assert float(cut["discounts"][e]) == pytest.approx(0.9)  # k = 1
    new_first = counts % 64  # the new streams' first slots: their stacks repeat the reset frame
    got = loaded.get(torch.arange(3) * 64 + new_first)
    assert torch.equal(got["obs"], reset_frames.repeat(1, 4, 1, 1))
    assert got["actions"].tolist() == [0, 0, 0]
    # Per env: the cut slot, and 5 new steps of which 2 still look ahead.
    assert torch.equal(loaded.valid().sum(), rb.valid().sum() + 3 * (1 + 3))
    with pytest.raises(ValueError, match=r"a replay buffer of \{'num_envs': 3, 'per_env': 64.* cannot be loaded into "
                                         r"one of \{'num_envs': 3, 'per_env': 32"):  # fmt: skip
        ReplayBuffer(3 * 32, 3, FRAME, torch.uint8, stack=4).load_state_dict(rb.state_dict())
