"""``pool.render()``: Atari frames equal ale-py's ``getScreenRGB`` of the same emulator state, bit for bit; MuJoCo
frames equal gymnasium's ``render_mode="rgb_array"`` of the same (qpos, qvel), bit for bit (the same renderer draws
both: ``rlfast/render.py``); Python envs draw their own in their worker processes; bad calls are clear errors."""

import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import rlfast
from rlfast import PoolStateError

ale_py = pytest.importorskip("ale_py")


@pytest.mark.parametrize("game", ["pong", "breakout"])
def test_atari_frames_equal_ale_py_screens(game):
    from ale_py.env import AtariEnv

    ref = AtariEnv(game, frameskip=4, repeat_action_probability=0.0, render_mode="rgb_array")
    ref.reset(seed=0)
    pool = rlfast.make(game.capitalize() + "-v5", num_envs=1, noop_max=0, use_fire_reset=False)
    pool.reset()
    frame = pool.render()
    assert frame.shape == (1, 210, 160, 3) and frame.dtype.is_floating_point is False
    assert np.array_equal(frame[0].numpy(), ref.render())
    rng = np.random.default_rng(0)
    changed = 0
    for _ in range(300):
        action = int(rng.integers(0, pool.single_action_space.n))
        _, _, ref_term, ref_trunc, _ = ref.step(action)
        _, _, term, trunc, _ = pool.step(np.array([action], dtype=np.int32))
        if ref_term or ref_trunc or bool(term[0]) or bool(trunc[0]):
            break
        now = pool.render()
        assert np.array_equal(now[0].numpy(), ref.render())
        changed += int(not np.array_equal(now.numpy(), frame.numpy()))
        frame = now
    assert changed > 100  # the screens compared were a game in motion, not one still frame
    ref.close()
    pool.close()


def test_atari_renders_the_envs_asked_for_in_their_order():
    pool = rlfast.make("Breakout-v5", num_envs=3, seeds=[3, 4, 5])
    pool.reset()
    rng = np.random.default_rng(1)
    for _ in range(40):
        pool.step(rng.integers(0, 4, size=3).astype(np.int32))
    every = pool.render()
    assert np.array_equal(pool.render([2, 0]).numpy(), every[[2, 0]].numpy())
    assert not np.array_equal(every[0].numpy(), every[1].numpy())  # each env's own screen
    pool.close()


def gl_available():
    try:
        pool = rlfast.make("InvertedPendulum-v5", num_envs=1)
        pool.reset()
        pool.render()
        return True
    except Exception as e:  # no OpenGL (EGL or OSMesa) on this machine: MuJoCo cannot draw
        return f"MuJoCo cannot render here: {type(e).__name__}: {e}"


@pytest.mark.parametrize("task", ["Ant-v5", "Hopper-v5", "Reacher-v5"])
def test_mujoco_frames_equal_gymnasium_rgb_array(task):
    gym = pytest.importorskip("gymnasium")
    if (why := gl_available()) is not True:
        pytest.skip(why)
    pool = rlfast.make(task, num_envs=2, seed=7)
    pool.reset()
    rng = np.random.default_rng(0)
    shape = (2, *pool.single_action_space.shape)
    for _ in range(20):
        pool.step(rng.uniform(-0.5, 0.5, size=shape).astype(np.float32))
    frames = pool.render()
    assert frames.shape == (2, 480, 480, 3)
    ref = gym.make(task, render_mode="rgb_array")
    ref.reset(seed=0)
    for e in range(2):
        state = pool._pool.render_state(e)
        nq = ref.unwrapped.model.nq
        ref.unwrapped.set_state(np.array(state[:nq]), np.array(state[nq:]))
        expected = ref.render()
        assert np.array_equal(frames[e].numpy(), expected), (task, e, np.abs(frames[e].numpy() - expected).max())
    assert not np.array_equal(frames[0].numpy(), frames[1].numpy())  # two states, two pictures
    ref.close()
    pool.close()


def test_bad_render_calls_are_clear_errors():
    pool = rlfast.make("Pong-v5", num_envs=4, batch_size=2)
    pool.async_reset()
    _, _, _, _, info = pool.recv()
    done = [int(i) for i in info["env_id"]]
    busy = sorted(set(range(4)) - set(done))
    assert pool.render(done).shape == (2, 210, 160, 3)  # the envs a recv returned are idle
    with pytest.raises(PoolStateError, match=f"render: env {busy[0]} is in flight"):
        pool.render([busy[0]])
    with pytest.raises(ValueError, match=r"render\(\) env_ids must be in \[0, 4\), got \[4\]"):
        pool.render([4])
    with pytest.raises(ValueError, match=r"must not repeat, got \[0, 0\]"):
        pool.render([0, 0])
    with pytest.raises(ValueError, match="at least one env id"):
        pool.render([])
    pool.close()
    with pytest.raises(PoolStateError, match="closed"):
        pool.render()
    cart = rlfast.make("CartPole-v1", num_envs=1)
    with pytest.raises(NotImplementedError, match="CartPole-v1 does not render"):
        cart.render()
    cart.close()


@pytest.fixture
def dotframes(monkeypatch):
    """examples/dotframes.py importable here and in the pool's (forked) workers."""
    examples = str(Path(__file__).resolve().parents[2] / "examples")
    monkeypatch.syspath_prepend(examples)
    import dotframes

    return dotframes


def test_python_envs_render_in_their_workers(dotframes):
    pool = rlfast.make("dotframes:DotFrame-v0", num_envs=3, num_threads=2, seed=5, render_mode="rgb_array")
    pool.reset()
    frames = pool.render()
    assert frames.shape == (3, 336, 336, 3)
    for e in range(3):  # each env's own frame: the same env made here, reset with its seed, draws the same
        ref = dotframes.DotFrames(stack=1, render_mode="rgb_array")
        ref.reset(seed=5 + e)
        assert np.array_equal(frames[e].numpy(), ref.render())
    pool.step(np.array([2, 2, 0], dtype=np.int32))
    assert not np.array_equal(pool.render([0]).numpy(), frames[[0]].numpy())  # the dot moved
    pool.close()


def test_a_python_env_without_rgb_array_is_a_clear_error(dotframes):
    pool = rlfast.make("dotframes:DotFrame-v0", num_envs=2, batch_size=1)
    pool.async_reset()
    _, _, _, _, info = pool.recv()
    idle = int(info["env_id"][0])
    with pytest.raises(rlfast.EnvError, match="render\\(\\) returned None: make the env with render_mode='rgb_array'"):
        pool.render([idle])
    with pytest.raises(PoolStateError, match=f"render: env {1 - idle} is in flight"):
        pool.render([1 - idle])
    pool.close()


class SlowRender(gym.Env):
    """An env whose render() outlasts the pool's step_timeout."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)
    render_mode = "rgb_array"

    def reset(self, *, seed=None, options=None):
        return np.zeros(1, np.float32), {}

    def step(self, action):
        return np.zeros(1, np.float32), 0.0, False, False, {}

    def render(self):
        time.sleep(3.0)
        return np.zeros((8, 8, 3), np.uint8)


def test_a_worker_that_does_not_answer_a_render_is_an_error_not_a_hang():
    pool = rlfast.make_from(SlowRender, 1, step_timeout=0.5)
    try:
        pool.reset()
        start = time.monotonic()
        with pytest.raises(rlfast.EnvError, match=r"did not answer the render of env 0 within 0.5 s"):
            pool.render()
        assert time.monotonic() - start < 2.5
    finally:
        pool.close()
