"""GameStats: full-game raw scores and lengths across episodic-life resets, against CleanRL's per-env loop."""

import numpy as np
import torch

import rlfast
from rlfast.algos.atari_stats import GameStats


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
    episodic_life + reward_clip each game spans several pool episodes and its score is not the clipped sum. Reference: CleanRL's RecordEpisodeStatistics for EnvPool (add info["reward"] every step,
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
