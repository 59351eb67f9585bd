"""A template pixel env for the trainers: a gymnasium env whose observations are 84x84 uint8 frames.

    PYTHONPATH=examples python scripts/ppo_atari.py --env-id dotframes:DotFrame-v0 --total-timesteps 61440
    PYTHONPATH=examples python scripts/appo.py --env-id dotframes:DotFrames-v0 --num-envs 16 --total-timesteps 150000
    PYTHONPATH=examples python scripts/evaluate.py runs/<run>

A dot sits on a line of the frame; the agent moves it left, keeps it, or moves it right, and earns 1 for every
step it ends in the middle band; an episode is 40 steps (a random policy scores about 4, the best about 36).
``DotFrame-v0`` gives one frame (1, 84, 84), as ``ppo_atari.py`` and ``dqn_atari.py`` want it (they stack 4);
``DotFrames-v0`` stacks its own 4 frames (4, 84, 84), as ``appo.py`` takes it. Registering the ids when the module
is imported is what makes ``"dotframes:DotFrame-v0"`` work: rlfast imports the module in each worker process.
``DotScene-v0`` gives a Dict observation, as ``appo.py`` takes it: ``screen``, the newest frame cut to (1, 48, 84),
and ``where``, the dot's position as one float32 in [0, 1]. ``DotFramesFloat-v0`` (float32 frames) is there to be
refused: the Nature CNN takes uint8 0-255. Made with
``render_mode="rgb_array"`` it renders (``pool.render()``, ``evaluate.py --video``): the newest frame in colour,
4x larger, the rewarding band in green.
"""

import gymnasium as gym
import numpy as np


class DotFrames(gym.Env):
    action_space = gym.spaces.Discrete(3)
    metadata = {"render_modes": ["rgb_array"], "render_fps": 15}

    def __init__(self, stack: int = 4, dtype: str = "uint8", render_mode=None) -> None:
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Box(0, 255, (stack, 84, 84), np.dtype(dtype))
        self.frames = np.zeros((stack, 84, 84), np.dtype(dtype))
        self.x = 0

    def _obs(self) -> np.ndarray:
        self.frames[:-1] = self.frames[1:]  # the oldest frame goes; the newest is drawn last
        self.frames[-1] = 0
        self.frames[-1, 40:44, self.x : self.x + 4] = 255
        return self.frames.copy()

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)  # seeds self.np_random: the only randomness
        self.x = int(self.np_random.integers(0, 80))
        self.frames[:] = 0
        return self._obs(), {}

    def step(self, action):
        self.x = min(80, max(0, self.x + 4 * (int(action) - 1)))
        return self._obs(), float(36 <= self.x <= 44), False, False, {}

    def render(self):
        if self.render_mode != "rgb_array":
            return None
        rgb = np.repeat(self.frames[-1, :, :, None], 3, axis=2).astype(np.uint8)
        rgb[:, 36:48, 1] = np.maximum(rgb[:, 36:48, 1], 90)  # the band where the dot earns 1
        return rgb.repeat(4, axis=0).repeat(4, axis=1)


class DotScene(DotFrames):
    """DotFrames with a Dict observation: the newest frame's rows 18-65 (the dot's line in the middle) and the dot's
    position."""

    def __init__(self, render_mode=None) -> None:
        super().__init__(stack=1, render_mode=render_mode)
        self.observation_space = gym.spaces.Dict({
            "screen": gym.spaces.Box(0, 255, (1, 48, 84), np.uint8),
            "where": gym.spaces.Box(0.0, 1.0, (1,), np.float32),
        })  # fmt: skip

    def _obs(self) -> dict:
        frame = super()._obs()
        return {"screen": frame[:, 18:66].copy(), "where": np.array([self.x / 80], np.float32)}


gym.register("DotFrame-v0", entry_point=DotFrames, kwargs={"stack": 1}, max_episode_steps=40)
gym.register("DotFrames-v0", entry_point=DotFrames, max_episode_steps=40)
gym.register("DotScene-v0", entry_point=DotScene, max_episode_steps=40)
gym.register("DotFramesFloat-v0", entry_point=DotFrames, kwargs={"dtype": "float32"}, max_episode_steps=40)
