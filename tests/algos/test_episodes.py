"""Episodes, every trainer's episode recorder, and its Atari rule GameStats: full-game raw scores and lengths
across episodic-life resets, against CleanRL's per-env loop."""

import numpy as np
import torch

import rlfast
from rlfast.algos.episodes import Episodes, GameStats


def test_scores_and_lengths_span_lives_and_restart_with_a_new_game():
    stats = GameStats(2)
    f, t = False, True
    # env 0: +1, life lost (no game over), reset step of the same game, +4, game over; then a new game.
    # env 1: truncated by the frame cap on its second step.
    results = [  # (raw_reward, truncated, game_over, new_game)
        ([1.0, 0.0], [f, f], [f, f], [f, f]),
        ([0.0, 2.0], [f, t], [f, f], [f, f]),
        ([0.0, 0.0], [f, f], [f, f], [f, t]),
        ([4.0, 3.0], [f, f], [t, f], [f, f]),
        ([0.0, 0.0], [f, f], [f, f], [t, f]),
    ]
    got = []
    for reward, trunc, over, new in results:
        ended, score, length = stats.update(torch.tensor(reward), torch.tensor(trunc), torch.tensor(over),
                                            torch.tensor(new))  # fmt: skip
        got.append((ended.tolist(), score.tolist(), length.tolist()))
    assert got == [
        ([f, f], [1.0, 0.0], [1, 1]),
        ([f, t], [1.0, 2.0], [2, 2]),  # env 1's game ends: 2 points in 2 steps
        ([f, f], [1.0, 0.0], [3, 1]),  # env 1's reset step starts its next game
        ([t, f], [5.0, 3.0], [4, 2]),  # env 0: both lives, 4 steps (the life-loss reset step included)
        ([f, f], [0.0, 3.0], [1, 3]),
    ]


def test_matches_cleanrl_bookkeeping_on_asterix_with_random_actions():
    """Asterix (3 lives, rewards of 50 and more) played at random loses a life every ~100 steps: under
    episodic_life + reward_clip each game spans several pool episodes and its score is not the clipped sum.
    Reference: CleanRL's RecordEpisodeStatistics for EnvPool (add info["reward"] every step,
    report and zero when done with no lives left), as a plain per-env Python loop."""
    n, steps = 3, 1200
    pool = rlfast.make("Asterix-v5", n, seed=3, num_threads=1, episodic_life=True, reward_clip=True, stack_num=1)
    rng = np.random.default_rng(0)
    stats = GameStats(n)
    ref_return, ref_length = [0.0] * n, [0] * n
    want, got = [], []
    life_losses = clipped_differs = 0
    pool.reset()
    for t in range(steps):
        _, reward, term, trunc, info = pool.step(rng.integers(0, pool.single_action_space.n, size=n).astype(np.int32))
        ended, score, length = stats.update(info["reward"], trunc, info["game_over"], info["new_game"])
        got += [(t, e, score[e].item(), length[e].item()) for e in ended.nonzero().flatten().tolist()]
        life_losses += int((term & ~info["game_over"]).sum())
        clipped_differs += int((reward != info["reward"]).sum())
        for e in range(n):
            ref_return[e] += float(info["reward"][e])
            ref_length[e] += 1
            if (term[e] or trunc[e]) and info["lives"][e] == 0:
                want.append((t, e, ref_return[e], ref_length[e]))
                ref_return[e], ref_length[e] = 0.0, 0
    pool.close()
    assert len(want) >= 2 * n and life_losses >= len(want)  # several games, most over several lives
    assert clipped_differs > 0  # raw rewards above 1 were seen
    assert got == want


def _atari_info(reward, game_over, new_game):
    return {"reward": torch.as_tensor(reward), "game_over": torch.as_tensor(game_over),
            "new_game": torch.as_tensor(new_game)}


def test_collect_counts_whole_atari_games_of_env_subsets():
    c = Episodes(3, atari=True)
    no = torch.zeros(2, dtype=torch.bool)
    # env 0 and 2 start games; 2 steps of env 0 (score 1 + 2), env 2's game ends after 1 step (score 5).
    c.collect(no, no, _atari_info([1.0, 5.0], [False, True], [True, True]), torch.tensor([0, 2]))
    c.collect(no[:1], no[:1], _atari_info([2.0], [True], [False]), torch.tensor([0]))
    done, returns, lengths = c.take()
    assert returns.tolist() == [[5.0, 3.0]] and lengths.tolist() == [[1, 2]] and done.all()
    assert c.take()[1].shape == (1, 0)


def test_record_of_two_column_slices_equals_record_of_all_envs():
    """A caller that records its envs in parts (columns ``envs`` of the table) makes the whole pool's table."""
    torch.manual_seed(0)
    T, B = 6, 4
    whole, halves = Episodes(B, atari=True, rows=T), Episodes(B, atari=True, rows=T)
    for t in range(T):
        reward = torch.randint(-1, 2, (B,)).float()
        over, new = torch.rand(B) < 0.3, torch.rand(B) < 0.3
        trunc, term = torch.rand(B) < 0.1, torch.zeros(B, dtype=torch.bool)
        whole.record(t, term, trunc, _atari_info(reward, over, new))
        for cols in (slice(0, 2), slice(2, 4)):
            info = {k: v[cols] for k, v in _atari_info(reward, over, new).items()}
            halves.record(t, term[cols], trunc[cols], info, cols)
    for a, b in zip(whole.table, halves.table):
        assert torch.equal(a, b)
    assert whole.table[0].any() and whole.table[1].abs().sum() > 0  # some games ended, with nonzero scores


def test_record_takes_the_pools_episode_totals_outside_atari():
    eps = Episodes(3, atari=False, rows=2)
    info = {"episode_return": torch.tensor([1.5, 2.0, 3.0]),
            "episode_length": torch.tensor([4, 5, 6], dtype=torch.int32)}
    ended = eps.record(1, torch.tensor([True, False, False]), torch.tensor([False, False, True]), info)
    assert ended.tolist() == [True, False, True]
    done, ret, length = eps.table
    assert done[0].sum() == 0 and ret[1].tolist() == [1.5, 2.0, 3.0] and length[1].tolist() == [4, 5, 6]


def test_game_starts_stack_a_users_frames_as_gymnasiums_frame_stack(pixel_env):
    """A user's pixel env (no ``new_game`` flag) in worker processes: ``game_starts`` (a reset's result, elapsed step
    0) drives ``rlfast.FrameStack`` to the stacks gymnasium's ``FrameStackObservation`` makes of the same env, step
    for step, across the time limit's resets (next-step autoreset: a step after an episode's end resets the env)."""
    import gymnasium as gym

    import dotframes  # noqa: F401 - registers the user's envs, as "dotframes:..." does in the workers
    from rlfast.algos.episodes import game_starts

    n, k, steps = 3, 4, 130  # episodes end at 40 steps: three resets each
    rng = np.random.default_rng(0)
    actions = rng.integers(0, 3, (steps, n))
    refs = [gym.wrappers.FrameStackObservation(gym.make("DotFrame-v0"), k, padding_type="reset") for _ in range(n)]
    want = [env.reset(seed=7 + i)[0] for i, env in enumerate(refs)]
    ends = [False] * n
    with rlfast.make("dotframes:DotFrame-v0", n, seed=7) as pool:
        stack, ids = rlfast.FrameStack(n, k, (1, 84, 84)), torch.arange(n)
        frames, info = pool.reset()
        assert game_starts(info).all()
        got = stack.update(frames, ids, game_starts(info))
        starts = 0
        for t in range(steps):
            assert np.array_equal(got.numpy(), np.stack(want).reshape(n, k, 84, 84)), t
            frames, _, term, trunc, info = pool.step(torch.from_numpy(actions[t]))
            for i, env in enumerate(refs):
                if ends[i]:
                    want[i] = env.reset()[0]
                    ends[i] = False
                else:
                    want[i], _, te, tr, _ = env.step(int(actions[t, i]))
                    ends[i] = te or tr
            assert (term | trunc).tolist() == ends
            starts += int(game_starts(info).sum())
            got = stack.update(frames, ids, game_starts(info))
        assert starts == 3 * n  # every env reset three times after its first episode's 40 steps
