"""Dict observations of Python envs (rlfast/procpool.py): each key its own tensor of the pool's output ring, the
values gymnasium's own vector env gives, in both autoreset modes and in async batches."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

import rlfast
from rlfast.procpool import ProcessEnvPool


class Scene(gym.Env):
    """A Dict observation of three keys of three dtypes, all drawn from the env's seeded generator and the
    action: ``screen`` uint8 [2, 6, 5], ``sensors`` float32 [3] and ``count`` int64 [] (the step). Episodes
    end (terminated) at random lengths, 2 to 6 steps."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Dict({
            "screen": gym.spaces.Box(0, 255, (2, 6, 5), np.uint8),
            "sensors": gym.spaces.Box(-np.inf, np.inf, (3,), np.float32),
            "count": gym.spaces.Box(0, 1000, (), np.int64),
        })  # fmt: skip
        self.action_space = gym.spaces.Discrete(4)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t, self.length = 0, int(self.np_random.integers(2, 7))
        return self._obs(0), {}

    def _obs(self, action: int) -> dict:
        return {
            "screen": self.np_random.integers(0, 256, (2, 6, 5), dtype=np.uint8),
            "sensors": (self.np_random.standard_normal(3) + action).astype(np.float32),
            "count": np.int64(self.t),
        }

    def step(self, action):
        self.t += 1
        return self._obs(int(action)), float(action) - 1.0, self.t >= self.length, False, {}


def assert_obs_equal(obs: dict, ref: dict, rows=slice(None)) -> None:
    assert list(obs) == list(ref)
    for key in ref:
        np.testing.assert_array_equal(obs[key].numpy(), np.asarray(ref[key])[rows], err_msg=key)


def test_the_layout_is_one_contiguous_tensor_per_key_in_the_space_order():
    with rlfast.make_from(Scene, 4, num_workers=2) as pool:
        assert isinstance(pool, ProcessEnvPool)
        assert pool.single_observation_space == Scene().observation_space
        assert list(pool.single_observation_space.spaces) == ["count", "screen", "sensors"]  # gymnasium sorts keys
        obs, info = pool.reset(seed=3)
        assert isinstance(obs, dict) and list(obs) == ["count", "screen", "sensors"]
        shapes = {k: (tuple(v.shape), v.dtype, v.is_contiguous()) for k, v in obs.items()}
        assert shapes == {"count": ((4,), torch.int64, True), "screen": ((4, 2, 6, 5), torch.uint8, True),
                          "sensors": ((4, 3), torch.float32, True)}  # fmt: skip
        assert "final_obs" not in info
        # Zero-copy: every lap of the ring returns the same views (recv's dict is new, its tensors are not).
        ptrs = []
        for _ in range(2 * pool._pool.num_blocks):
            obs, *_ = pool.step(np.zeros(4, np.int64))
            ptrs.append({k: v.data_ptr() for k, v in obs.items()})
        k = pool._pool.num_blocks
        assert ptrs[:k] == ptrs[k:]
        obs["screen"] = None  # the caller's dict: the pool's own views stay
        obs, *_ = pool.step(np.zeros(4, np.int64))
        assert isinstance(obs["screen"], torch.Tensor)


@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_values_equal_gymnasium_sync_vector_env_in_both_autoreset_modes(mode):
    n, seed = 5, 7
    ref_mode = AutoresetMode.SAME_STEP if mode == "same_step" else AutoresetMode.NEXT_STEP
    ref = gym.vector.SyncVectorEnv([Scene for _ in range(n)], autoreset_mode=ref_mode)
    with rlfast.make_from(Scene, n, seed=seed, num_workers=2, autoreset_mode=mode) as pool:
        obs, _ = pool.reset()
        ref_obs, _ = ref.reset(seed=[seed + i for i in range(n)])
        assert_obs_equal(obs, ref_obs)
        rng = np.random.default_rng(0)
        ends = 0
        for _ in range(40):
            a = rng.integers(0, 4, n)
            obs, r, term, trunc, info = pool.step(a)
            ref_obs, ref_r, ref_term, ref_trunc, ref_info = ref.step(a)
            assert_obs_equal(obs, ref_obs)
            np.testing.assert_array_equal(r.numpy(), ref_r)
            np.testing.assert_array_equal(term.numpy(), ref_term)
            np.testing.assert_array_equal(trunc.numpy(), ref_trunc)
            if mode == "same_step":
                assert list(info["final_obs"]) == list(ref_obs)
                for i in np.flatnonzero(ref_info.get("_final_obs", np.zeros(n, bool))):
                    for key, value in ref_info["final_obs"][i].items():
                        np.testing.assert_array_equal(info["final_obs"][key][i].numpy(), value, err_msg=key)
                ends += int(ref_info.get("_final_obs", np.zeros(n, bool)).sum())
            else:
                assert "final_obs" not in info
                ends += int(term.sum())
        assert ends > 10


def test_async_batches_give_each_env_its_own_observations():
    """Async batches in finishing order: each result's keys are those of env ``env_id`` stepped alone."""
    n, batch, seed = 6, 2, 11
    refs = [Scene() for _ in range(n)]
    expected = {i: refs[i].reset(seed=seed + i)[0] for i in range(n)}
    with rlfast.make_from(Scene, n, batch_size=batch, seed=seed, num_workers=2) as pool:
        pool.async_reset()
        rng = np.random.default_rng(1)
        done = np.zeros(n, bool)
        seen = set()
        for _ in range(60):
            obs, r, term, trunc, info = pool.recv()
            ids = info["env_id"].numpy()
            seen.update(ids.tolist())
            for row, e in enumerate(ids):
                for key, value in expected[e].items():
                    np.testing.assert_array_equal(obs[key][row].numpy(), value, err_msg=f"env {e} {key}")
            actions = rng.integers(0, 4, batch)
            for a, e in zip(actions, ids):  # next-step autoreset: a finished env's next action resets it
                expected[e] = refs[e].reset()[0] if done[e] else refs[e].step(a)[0]
                done[e] = False if done[e] else refs[e].t >= refs[e].length
            pool.send(actions, info["env_id"])
        assert seen == set(range(n))


def test_gymnasium_vector_env_adapter_gives_dicts_of_arrays_and_peeks_them():
    with rlfast.make_from(Scene, 3, seed=2, num_workers=1) as pool:
        env = rlfast.GymnasiumVectorEnv(pool)
        assert env.observation_space == gym.vector.utils.batch_space(Scene().observation_space, 3)
        obs, _ = env.reset()
        assert all(isinstance(v, np.ndarray) for v in obs.values()) and obs["screen"].shape == (3, 2, 6, 5)
        stepped, *_ = env.step(np.array([1, 2, 3]))
        again, _ = env.reset(options={"reset_mask": np.array([True, False, False])})  # envs 1, 2: peeked
        for key in stepped:
            np.testing.assert_array_equal(again[key][1:], stepped[key][1:])
        assert env.observation_space.contains(again)


def test_an_env_error_names_the_env_which_then_starts_over():
    class Failing(Scene):
        def step(self, action):
            if action == 3:
                raise RuntimeError("Failing was told to fail")
            return super().step(action)

    with rlfast.make_from(Failing, 2, num_workers=1) as pool:
        pool.reset()
        with pytest.raises(rlfast.EnvError, match=r"(?s)env 1 raised: .*Failing was told to fail"):
            pool.step(np.array([0, 3]))
        obs, *_ = pool.step(np.array([0, 0]))  # env 1 reset, env 0 stepped
        assert obs["count"].tolist() == [2, 0]


class _Spaces(Scene):
    def __init__(self, space: gym.Space) -> None:
        super().__init__()
        self.observation_space = space


@pytest.mark.parametrize("space, message", [
    (gym.spaces.Dict({"img": gym.spaces.Box(0, 1, (2,)), "inner": gym.spaces.Dict({"x": gym.spaces.Box(0, 1, (1,))})}),
     r"key 'inner' is Dict\(.*all Box spaces, one level deep"),
    (gym.spaces.Dict({"img": gym.spaces.Box(0, 1, (2,)), "mode": gym.spaces.Discrete(3)}),
     r"key 'mode' is Discrete\(3\).*FlattenObservation"),
    (gym.spaces.Dict({"half": gym.spaces.Box(0, 1, (2,), np.float16)}), r"key 'half'.*dtype float16"),
    (gym.spaces.Dict({}), "has no keys"),
    (gym.spaces.Tuple([gym.spaces.Box(0, 1, (2,))]), "FlattenObservation"),
])  # fmt: skip
def test_what_cannot_be_a_dict_of_tensors_is_refused_naming_the_key(space, message):
    with pytest.raises(ValueError, match=message):
        rlfast.make_from(_Spaces, 2, env_kwargs_per_env=[{"space": space}] * 2)


@pytest.mark.parametrize("script", ["ppo.py", "appo.py", "dqn.py", "ppo_continuous.py"])
def test_trainers_refuse_dict_observations_they_cannot_take_and_say_so(script, load_script):
    """The pool gives Dict observations; the MLP trainers refuse them with a usage error naming the keys, and appo.py
    (which takes a Dict of frames and a vector) refuses this layout naming each key's space (with --recurrent too).
    The frame-stacking trainers: ``check_frames``."""
    from rlfast.algos.runargs import check_frames

    module = load_script(script)
    args = module.Args(env_id="my_pkg:Scene-v0", **({"recurrent": "lstm"} if script == "appo.py" else {}))
    action_space = gym.spaces.Box(-1, 1, (2,)) if script == "ppo_continuous.py" else gym.spaces.Discrete(4)
    message = (r"my_pkg:Scene-v0 has Dict observations \(count: \(\) int64, screen: \(2, 6, 5\) uint8, sensors: "
               r"\(3,\) float32\); appo.py takes a Dict of one uint8 Box of frames" if script == "appo.py" else
               rf"my_pkg:Scene-v0 has Dict observations \(count, screen, sensors\); {script} needs a Box of numbers "
               r"\(appo.py trains a Dict of frames and a vector")  # fmt: skip
    with pytest.raises(SystemExit, match=message):
        module.make_agent(args, Scene().observation_space, action_space)
    with pytest.raises(SystemExit, match=r"has Dict observations \(count, screen, sensors\); ppo_atari.py stacks"):
        check_frames("ppo_atari.py", "my_pkg:Scene-v0", Scene().observation_space)
