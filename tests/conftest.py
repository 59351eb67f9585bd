"""Shared fixtures and markers."""

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Optional

import pytest
import torch


def pytest_collection_modifyitems(config, items):
    skip = None if torch.cuda.is_available() else pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if skip is not None and "cuda" in item.keywords:
            item.add_marker(skip)
        # .ci/run reruns these from a pytest whose SIGINT is ignored from birth (their outcome depends on how
        # this process was started; the trainers' Ctrl-C tests start their trainer that way in every run).
        if "sigint_raises" in getattr(item, "fixturenames", ()):
            item.add_marker("own_sigint")


@pytest.fixture
def load_script():
    """``load_script("ppo.py")``, ``load_script("bench/bench_dqn.py")``: a file of ``scripts/`` imported as a
    module named by its stem (registered in sys.modules, as tyro and dataclasses need), with ``scripts/`` and
    its own folder importable as when it runs."""
    scripts = Path(__file__).resolve().parents[1] / "scripts"

    def load(name: str) -> ModuleType:
        path = scripts / name
        for folder in (str(scripts), str(path.parent)):
            if folder not in sys.path:
                sys.path.insert(0, folder)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module

    return load


@pytest.fixture
def sigint_raises():
    """SIGINT raises KeyboardInterrupt in this process for the test's duration, also where the test command
    was started with SIGINT ignored (a background job of a non-interactive shell, some CI runners): Python
    then never installs its handler, and a test that sends itself SIGINT would wait for nothing."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture
def interrupt_training():
    """``interrupt_training(script, *flags, cwd=..., env=None, sig=SIGINT)``: starts ``scripts/<script>`` with
    ``flags`` and SIGINT ignored (as a trainer started in the background from a script is, whatever launched
    pytest), waits until training is under way (its first progress line), sends ``sig`` (Ctrl-C, or SIGTERM)
    and checks the clean exit every trainer owes: status 128 + sig, no traceback, and the message naming
    the step and iteration of the ``checkpoint.pt`` it wrote to ``cwd/runs/<run>``. Returns
    ``(stdout, checkpoint)``."""
    from rlfast.algos.checkpoint import load_checkpoint

    scripts = Path(__file__).resolve().parents[1] / "scripts"

    def interrupt(
        script: str, *flags: str, cwd: Path, env: Optional[dict] = None, sig: int = signal.SIGINT
    ) -> tuple[str, dict]:
        # bash execs the trainer with SIGINT ignored; the trainer must install its own handler.
        cmd = ["bash", "-c", 'trap "" INT; exec "$@"', "bash", sys.executable, str(scripts / script), *flags]
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        head = []
        try:
            while not (line := proc.stdout.readline()).startswith("step"):  # training is under way
                assert line, f"{script} ended before training: {proc.stderr.read()}"
                head.append(line)
            time.sleep(0.5)
            proc.send_signal(sig)
            out, err = proc.communicate(timeout=60)
            out = "".join(head) + line + out
        finally:
            proc.kill()
        assert proc.returncode == 128 + sig and "Traceback" not in err, (proc.returncode, err)
        (run_dir,) = (cwd / "runs").iterdir()
        ckpt = load_checkpoint(run_dir / "checkpoint.pt")
        assert f"interrupted at step {ckpt['global_step']:,} (iteration {ckpt['iteration']}): saved " in out, out
        assert ckpt["iteration"] >= 1
        return out, ckpt

    return interrupt


PIXEL_ENV = '''"""A user's pixel env: 84x84 frames of a dot the agent steers left or right, reward 1 in the middle."""
import gymnasium as gym
import numpy as np


class DotFrames(gym.Env):
    action_space = gym.spaces.Discrete(3)

    def __init__(self, stack=4, dtype="uint8"):
        self.observation_space = gym.spaces.Box(0, 255, (stack, 84, 84), np.dtype(dtype))
        self.frames = np.zeros((stack, 84, 84), np.dtype(dtype))

    def _obs(self):
        self.frames[:-1] = self.frames[1:]
        self.frames[-1] = 0
        self.frames[-1, 40:44, self.x : self.x + 4] = 255
        return self.frames.copy()

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.x = int(self.np_random.integers(0, 80))
        self.frames[:] = 0
        return self._obs(), {}

    def step(self, action):
        self.x = min(80, max(0, self.x + 4 * (int(action) - 1)))
        return self._obs(), float(36 <= self.x <= 44), False, False, {}


gym.register("DotFrames-v0", entry_point=DotFrames, max_episode_steps=40)  # 4 frames stacked by the env
gym.register("DotFrame-v0", entry_point=DotFrames, kwargs={"stack": 1}, max_episode_steps=40)  # one frame
gym.register("DotFramesFloat-v0", entry_point=DotFrames, kwargs={"dtype": "float32"}, max_episode_steps=40)
'''


@pytest.fixture
def pixel_env(tmp_path):
    """The environment variables of a process that finds ``dotframes``, a user's module registering pixel envs:
    ``dotframes:DotFrame-v0`` (uint8 frames (1, 84, 84)), ``DotFrames-v0`` (4 of them stacked by the env: (4, 84,
    84)) and ``DotFramesFloat-v0`` (float32 (4, 84, 84)); the module is importable in this process too."""
    folder = tmp_path / "pixel_env"
    folder.mkdir()
    (folder / "dotframes.py").write_text(PIXEL_ENV)
    sys.path.insert(0, str(folder))
    yield {**os.environ, "PYTHONPATH": f"{folder}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    sys.path.remove(str(folder))
    sys.modules.pop("dotframes", None)
