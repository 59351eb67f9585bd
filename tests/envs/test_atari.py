"""Atari envs against ale-py (and EnvPool when installed): spaces, seeding, step equality.

Tolerances: none. The frame resize reproduces OpenCV's INTER_AREA arithmetic (which ale-py's
vector env and EnvPool both call) operation for operation, so frames are compared bit for bit.
Two documented behaviour differences are excluded from the ale-py comparison, not tolerated:
- ale-py's vector env pads the stack with zeros after a reset, rlfast (like EnvPool and
  gymnasium's FrameStackObservation) repeats the reset frame: only the newest frame is
  compared, and the stack is checked for being the last 4 newest frames;
- on the step where the game ends, ale-py stops before grabbing the screen (its terminal
  frame repeats the previous one) and so does EnvPool when the game ends on frame 1 or 2 of
  the skip (a stale buffer); rlfast shows the real final frame (max-pooled when the skip
  completed, as EnvPool). Only terminal frames are affected, and only those are exempted.
"""

import numpy as np
import pytest
import torch

import rlfast
from rlfast.frame_stack import FrameStack

ale_py = pytest.importorskip("ale_py")

GAMES = ["pong", "breakout", "space_invaders"]


def task_id(game):
    return "".join(p.capitalize() for p in game.split("_")) + "-v5"


def minimal_actions(game):
    ale = ale_py.ALEInterface()
    ale.setLoggerMode(ale_py.LoggerMode.Error)
    ale.loadROM(ale_py.roms.get_rom_path(game))
    return len(ale.getMinimalActionSet())


@pytest.mark.wheel
def test_every_ale_py_game_is_registered():
    envs = set(rlfast.list_envs())
    for game in ale_py.roms.get_all_rom_ids():
        assert task_id(game) in envs
    assert {"Pong-v5", "MontezumaRevenge-v5", "SpaceInvaders-v5"} <= envs


@pytest.mark.wheel
@pytest.mark.parametrize("game", GAMES)
def test_spaces(game):
    with rlfast.make(task_id(game), num_envs=1) as pool:
        assert pool.single_observation_space.shape == (4, 84, 84)
        assert pool.single_observation_space.dtype == np.uint8
        assert pool.single_observation_space.high.max() == 255
        assert pool.single_action_space.n == minimal_actions(game)
        assert pool.max_episode_steps == 27000
        obs, info = pool.reset()
        assert obs.shape == (1, 4, 84, 84) and obs.dtype == torch.uint8
        assert info["lives"].dtype == torch.int32 and bool(info["new_game"][0])


def test_options_change_spaces():
    with rlfast.make("Pong-v5", num_envs=1, gray_scale=False, img_height=42, img_width=64, stack_num=2) as pool:
        assert pool.single_observation_space.shape == (6, 42, 64)
        obs, _ = pool.reset()
        assert obs.shape == (1, 6, 42, 64)
    with rlfast.make("Pong-v5", num_envs=1, full_action_space=True) as pool:
        assert pool.single_action_space.n == 18


def random_actions(pool, steps, n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, pool.single_action_space.n, size=(steps, n)).astype(np.int32)


@pytest.mark.wheel
@pytest.mark.parametrize("game", GAMES)
def test_matches_ale_py_vector_env(game):
    from ale_py.vector_env import AtariVectorEnv

    n, steps = 2, 400
    ref = AtariVectorEnv(game, n, noop_max=0, use_fire_reset=False, reward_clipping=False)
    pool = rlfast.make(task_id(game), num_envs=n, noop_max=0, use_fire_reset=False)
    ref_obs, ref_info = ref.reset(seed=0)
    obs, info = pool.reset()
    assert np.array_equal(ref_obs[:, -1], obs[:, -1].numpy())
    history = [[obs[e, -1].clone()] * 4 for e in range(n)]
    compared = terminals = 0
    for actions in random_actions(pool, steps, n):
        ref_obs, ref_rew, ref_term, ref_trunc, ref_info = ref.step(actions)
        obs, rew, term, trunc, info = pool.step(actions)
        np.testing.assert_array_equal(rew.numpy(), ref_rew.astype(np.float32))
        np.testing.assert_array_equal(term.numpy(), ref_term)
        np.testing.assert_array_equal(trunc.numpy(), ref_trunc)
        np.testing.assert_array_equal(info["lives"].numpy(), ref_info["lives"])
        np.testing.assert_array_equal(info["episode_frame_number"].numpy(), ref_info["episode_frame_number"])
        for e in range(n):
            if ref_term[e]:
                terminals += 1
            else:
                np.testing.assert_array_equal(obs[e, -1].numpy(), ref_obs[e, -1])
                compared += 1
            # The stack is the last four newest frames, the reset frame repeated at the start.
            frame = obs[e, -1].clone()
            history[e] = [frame] * 4 if bool(info["new_game"][e]) else history[e][1:] + [frame]
            assert torch.equal(obs[e], torch.stack(history[e]))
    ref.close()
    pool.close()
    assert compared > steps  # most steps were compared, not skipped
    if game == "breakout":
        assert terminals > 0  # random Breakout loses all lives within 400 steps


@pytest.mark.parametrize("game", GAMES)
def test_matches_envpool_exactly(game):
    envpool = pytest.importorskip("envpool")
    n, steps = 2, 300
    # noop_max=1: EnvPool's reset is then deterministic (no no-ops, FIRE where the game has it).
    ref = envpool.make_gymnasium(task_id(game), num_envs=n, noop_max=1, seed=0)
    pool = rlfast.make(task_id(game), num_envs=n, noop_max=1, seed=0)
    ref_obs, _ = ref.reset()
    obs, _ = pool.reset()
    np.testing.assert_array_equal(obs.numpy(), ref_obs)
    for actions in random_actions(pool, steps, n, seed=1):
        ref_obs, ref_rew, ref_term, ref_trunc, ref_info = ref.step(actions)
        obs, rew, term, trunc, info = pool.step(actions)
        for e in range(n):
            if ref_term[e] and not np.array_equal(obs[e, -1].numpy(), ref_obs[e, -1]):
                # A game that ends on frame 1 or 2 of the skip: EnvPool's newest frame is a
                # stale buffer (a repeat of the previous one); ours is the real final frame.
                np.testing.assert_array_equal(ref_obs[e, -1], ref_obs[e, -2])
                np.testing.assert_array_equal(obs[e, :-1].numpy(), ref_obs[e, :-1])
            else:
                np.testing.assert_array_equal(obs[e].numpy(), ref_obs[e])
        np.testing.assert_array_equal(rew.numpy(), ref_rew)
        np.testing.assert_array_equal(term.numpy(), ref_term)
        np.testing.assert_array_equal(info["lives"].numpy(), ref_info["lives"])
        if ref_term.any() or ref_trunc.any():
            break  # EnvPool's gymnasium API autoresets in the same step; ours next step
    ref.close()
    pool.close()


@pytest.mark.parametrize(
    "kwargs", [dict(gray_scale=False), dict(img_height=42, img_width=64, stack_num=2), dict(frame_skip=3)]
)
def test_options_match_envpool(kwargs):
    envpool = pytest.importorskip("envpool")
    ref = envpool.make_gymnasium("Pong-v5", num_envs=2, noop_max=1, seed=0, **kwargs)
    pool = rlfast.make("Pong-v5", num_envs=2, noop_max=1, seed=0, **kwargs)
    ref_obs, _ = ref.reset()
    obs, _ = pool.reset()
    np.testing.assert_array_equal(obs.numpy(), ref_obs)
    for actions in random_actions(pool, 100, 2, seed=2):
        ref_obs, ref_rew, *_ = ref.step(actions)
        obs, rew, *_ = pool.step(actions)
        np.testing.assert_array_equal(obs.numpy(), ref_obs)
        np.testing.assert_array_equal(rew.numpy(), ref_rew)
    ref.close()
    pool.close()


def rollout(task, num_threads, seed, steps=60, **kwargs):
    with rlfast.make(task, num_envs=4, num_threads=num_threads, seed=seed, **kwargs) as pool:
        obs, _ = pool.reset()
        out = [obs.clone()]
        for actions in random_actions(pool, steps, 4):
            obs, rew, term, trunc, info = pool.step(actions)
            out += [obs.clone(), rew.clone(), term.clone(), info["lives"].clone()]
    return out


def same(a, b):
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


@pytest.mark.wheel
def test_same_seed_same_rollout_across_threads_other_seed_differs():
    # Sticky actions and random no-ops: both draw from the per-env seed only.
    kwargs = dict(repeat_action_probability=0.25)
    one = rollout("Breakout-v5", 1, seed=3, **kwargs)
    two = rollout("Breakout-v5", 2, seed=3, **kwargs)
    assert same(one, two)
    assert not same(one, rollout("Breakout-v5", 2, seed=4, **kwargs))


def test_reseed_equals_a_fresh_pool_with_that_seed():
    kwargs = dict(num_envs=2, repeat_action_probability=0.25)
    actions = np.array([[1, 2], [3, 0], [2, 2]] * 10, dtype=np.int32)

    def run(pool, seed=None):
        obs, _ = pool.reset(seed=seed)
        out = [obs.clone()]
        for a in actions:
            out.append(pool.step(a)[0].clone())
        return out

    with rlfast.make("Breakout-v5", seed=5, **kwargs) as fresh, rlfast.make("Breakout-v5", seed=0, **kwargs) as pool:
        want = run(fresh)
        run(pool)
        assert same(want, run(pool, seed=5))


def test_sticky_actions_change_the_rollout():
    base = rollout("Breakout-v5", 2, seed=3, noop_max=0)
    assert not same(base, rollout("Breakout-v5", 2, seed=3, noop_max=0, repeat_action_probability=0.25))


def test_reward_clip_keeps_raw_reward_in_info():
    with rlfast.make("SpaceInvaders-v5", num_envs=2, reward_clip=True, seed=0) as pool:
        pool.reset()
        raw_seen = []
        for actions in random_actions(pool, 300, 2):
            _, rew, _, _, info = pool.step(actions)
            np.testing.assert_array_equal(rew.numpy(), np.sign(info["reward"].numpy()))
            raw_seen += info["reward"].tolist()
    assert max(raw_seen) > 1  # Space Invaders pays 5..30 per alien


def test_episodic_life_ends_on_life_loss_and_continues_the_game():
    with rlfast.make("Breakout-v5", num_envs=1, episodic_life=True, seed=0) as pool:
        _, info = pool.reset()
        lives = int(info["lives"][0])
        life_losses = 0
        for actions in random_actions(pool, 400, 1):
            _, _, term, _, info = pool.step(actions)
            if term[0] and not info["game_over"][0]:
                assert int(info["lives"][0]) < lives
                life_losses += 1
                _, _, _, _, info = pool.step(actions)  # the autoreset step
                assert not info["new_game"][0]  # same game, stack kept
                assert int(info["episode_frame_number"][0]) > 0
            elif term[0]:
                _, _, _, _, info = pool.step(actions)
                assert info["new_game"][0]
            lives = int(info["lives"][0])
        assert life_losses >= 2


def test_frame_cap_truncates_the_game():
    with rlfast.make("Pong-v5", num_envs=1, max_num_frames_per_episode=40, noop_max=0) as pool:
        pool.reset()
        for step in range(1, 11):
            _, _, term, trunc, info = pool.step(np.zeros(1, np.int32))
            assert bool(trunc[0]) == (step == 10)
        _, _, _, _, info = pool.step(np.zeros(1, np.int32))
        assert info["new_game"][0]


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def test_device_frame_stack_equals_host_stacking(device):
    """stack_num=1 + FrameStack (on ``device``) == stack_num=4, per env, with async batches and resets."""
    n, batch, steps = 4, 2, 500
    kwargs = dict(num_envs=n, batch_size=batch, num_threads=1, seed=7, episodic_life=True)
    host = rlfast.make("Breakout-v5", stack_num=4, **kwargs)
    newest = rlfast.make("Breakout-v5", stack_num=1, **kwargs)
    stack = FrameStack(n, 4, newest.single_observation_space.shape, device=device)
    # Each env's k-th action is fixed, so per-env trajectories do not depend on batch order.
    table = np.random.default_rng(0).integers(0, 4, size=(n, steps + 1)).astype(np.int32)

    def run(pool, stacker):
        per_env = {e: [] for e in range(n)}
        count = np.zeros(n, dtype=np.int64)
        pool.async_reset()
        resets = life_losses = 0
        for _ in range(steps):
            obs, _, term, _, info = pool.recv()
            life_losses += int((term & ~info["game_over"]).sum())
            ids = info["env_id"].clone()
            if stacker is not None:
                obs = stacker.update(obs, ids, info["new_game"])
            resets += int(info["new_game"].sum())
            assert obs.device.type == (device if stacker is not None else "cpu")
            for row, e in enumerate(ids.tolist()):
                per_env[e].append(obs[row].to("cpu", copy=True))
            acts = np.array([table[e, count[e]] for e in ids.tolist()], dtype=np.int32)
            count[ids.numpy()] += 1
            pool.send(acts, ids.numpy())
        return per_env, resets, life_losses

    want, resets, life_losses = run(host, None)
    got, _, _ = run(newest, stack)
    host.close()
    newest.close()
    assert resets > n and life_losses > n  # new games and same-game (soft) resets both happened
    for e in range(n):
        k = min(len(want[e]), len(got[e]))
        assert k > 10
        for t in range(k):
            assert torch.equal(want[e][t], got[e][t]), f"env {e} step {t}"


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(stack_num=0), "stack_num"),
        (dict(frame_skip=0), "frame_skip"),
        (dict(noop_max=-1), "noop_max"),
        (dict(img_height=300), "img_height"),
        (dict(img_width=0), "img_width"),
        (dict(repeat_action_probability=1.5), "repeat_action_probability"),
        (dict(gray_scale=1), "gray_scale"),
        (dict(gray_scal=True), "unknown option 'gray_scal'"),
    ],
)
def test_bad_options_raise_value_error(kwargs, match):
    with pytest.raises(ValueError, match=match):
        rlfast.make("Pong-v5", num_envs=1, **kwargs)


def test_unknown_game_and_bad_action():
    with pytest.raises(ValueError, match="Pong-v5"):
        rlfast.make("Pongg-v5", num_envs=1)
    with rlfast.make("Pong-v5", num_envs=2) as pool:
        pool.reset()
        with pytest.raises(ValueError, match="out of range"):
            pool.step(np.array([0, 6], dtype=np.int32))
        _, rew, *_ = pool.step(np.array([0, 5], dtype=np.int32))  # still usable
        assert rew.shape == (2,)


def test_frame_stack_checks_shapes():
    stack = FrameStack(2, 4, (1, 84, 84))
    with pytest.raises(ValueError, match="frames must be"):
        stack.update(torch.zeros(2, 4, 84, 84, dtype=torch.uint8), torch.tensor([0, 1]), torch.tensor([True, True]))
