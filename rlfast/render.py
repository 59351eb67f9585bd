"""Frames of MuJoCo envs, drawn as gymnasium's ``render_mode="rgb_array"`` draws them.

The engine steps MuJoCo in C++ without a graphics context; rendering happens here, on demand, in the calling
thread: each env's state (qpos, qvel, from ``_C.Pool.render_state``) is copied into a MuJoCo model of the same
XML file, ``mj_forward`` places the bodies, and gymnasium's own offscreen renderer draws it with the task's default
camera (its ``default_camera_config``), at gymnasium's 480 x 480. So a frame is what gymnasium shows for the same
state. Nothing of this is loaded until a MuJoCo pool's ``render()`` is first called.

Headless machines: MuJoCo picks its OpenGL backend from ``MUJOCO_GL``; where it is unset and no display is
there, EGL is chosen (Mesa's software renderer on a CPU-only machine: Debian's ``libegl1 libegl-mesa0
libgl1-mesa-dri``, with PyOpenGL). ``MUJOCO_GL=osmesa`` works too.
"""

import importlib
import inspect
import os
from typing import Any

import numpy as np
import torch

WIDTH = HEIGHT = 480
"""gymnasium's MujocoEnv default render size"""
MAX_GEOM = 1000
"""gymnasium's MujocoEnv default"""


def _choose_backend() -> None:
    if "MUJOCO_GL" not in os.environ and not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
        os.environ["MUJOCO_GL"] = "egl"


def default_camera_config(task_id: str) -> dict:
    """The ``default_camera_config`` gymnasium's env class for ``task_id`` uses (its ``__init__``'s default)."""
    import gymnasium

    entry = gymnasium.envs.registry[task_id].entry_point
    module, _, name = entry.partition(":")
    cls = getattr(importlib.import_module(module), name)
    default = inspect.signature(cls.__init__).parameters["default_camera_config"].default
    return dict(default)


class MujocoFrames:
    """The renderer of one MuJoCo pool: a model of its XML file, a data to place each env's state in, and
    gymnasium's offscreen viewer over them (its GL context made once, on first use)."""

    def __init__(self, task_id: str, xml_file: str, frame_skip: int) -> None:
        _choose_backend()
        import mujoco
        from gymnasium.envs.mujoco.mujoco_rendering import MujocoRenderer

        self._mujoco, self.frame_skip = mujoco, frame_skip
        self.model = mujoco.MjModel.from_xml_path(xml_file)
        self.model.vis.global_.offwidth, self.model.vis.global_.offheight = WIDTH, HEIGHT  # as gymnasium sets them
        self.data = mujoco.MjData(self.model)
        self.renderer = MujocoRenderer(self.model, self.data, default_camera_config(task_id), WIDTH, HEIGHT,
                                       MAX_GEOM, None, None, {})  # fmt: skip

    def frame(self, state: list[float], follow: bool = False) -> np.ndarray:
        """The RGB frame [H, W, 3] of the env whose (qpos, qvel) is ``state``. ``follow``: the camera looks at the
        root body's (x, y) instead of where gymnasium's default camera stays (an Ant walks out of that view)."""
        nq, nv = self.model.nq, self.model.nv
        if len(state) != nq + nv:
            raise ValueError(f"a MuJoCo state of {nq} + {nv} values was expected, got {len(state)}")
        self.data.qpos[:] = state[:nq]
        self.data.qvel[:] = state[nq:]
        self._mujoco.mj_forward(self.model, self.data)
        if follow:
            camera = self.renderer._get_viewer("rgb_array").cam  # made, with the task's camera config, on first use
            camera.lookat[:2] = self.data.xpos[1][:2]
        return self.renderer.render("rgb_array")

    def close(self) -> None:
        self.renderer.close()


def mujoco_frames(binding: Any, env_ids: np.ndarray, renderer: MujocoFrames, follow: bool = False) -> torch.Tensor:
    """uint8 [n, H, W, 3]: the frames of ``env_ids`` of a MuJoCo pool's ``binding``."""
    frames = [renderer.frame(binding.render_state(int(i)), follow) for i in env_ids]
    return torch.from_numpy(np.stack(frames)) if frames else torch.empty((0, HEIGHT, WIDTH, 3), dtype=torch.uint8)
