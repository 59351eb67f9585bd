"""Playing a policy for whole episodes on a pool of its own: ``scripts/evaluate.py``, and evaluation and video
during training (``--eval-every``, ``--capture-video``: ``Evaluator``, which the run layer calls).

An evaluation never touches the training envs: it has its own pool, seeded apart, built with the trainer's
evaluation options (``eval_env_kwargs``: Atari's whole games with raw scores), and plays each env's first
episode (so short episodes are not over-counted). A video is the frames of ``pool.render()`` after every step
of the first env(s), written as they come by imageio's ffmpeg writer (H.264 MP4).
"""

import copy
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import gymnasium as gym
import numpy as np
import torch

import rlfast
from rlfast.algos.episodes import game_starts
from rlfast.algos.obs import each

EVAL_SEED_OFFSET = 1_000_003
"""evaluation envs during training are seeded at --seed + this: apart from every training env's seed"""
ATARI_FPS = 15
"""an Atari step is 4 emulator frames at 60 Hz"""


class StackedFrames:
    """``pool`` with each env's last ``k`` frames stacked, as the Atari trainers stack a user's pixel env's frames:
    what ``evaluate`` uses of a pool (``reset``, ``step``, ``render``, the spaces, ``num_envs``), closed with it."""

    def __init__(self, pool: "rlfast.EnvPool", k: int) -> None:
        self.pool, self.num_envs = pool, pool.num_envs
        frame = pool.single_observation_space.shape
        self.stack, self.ids = rlfast.FrameStack(pool.num_envs, k, frame), torch.arange(pool.num_envs)
        self.single_observation_space = gym.spaces.Box(0, 255, (k * frame[0], *frame[1:]), np.uint8)
        self.single_action_space = pool.single_action_space
        self.task_id = pool.task_id

    def reset(self) -> tuple[torch.Tensor, dict]:
        frames, info = self.pool.reset()
        return self.stack.update(frames, self.ids, game_starts(info)), info

    def step(self, actions: torch.Tensor) -> tuple:
        frames, reward, terminated, truncated, info = self.pool.step(actions)
        return self.stack.update(frames, self.ids, game_starts(info)), reward, terminated, truncated, info

    def render(self, env_ids: Optional[Sequence[int]] = None, follow: bool = False) -> torch.Tensor:
        return self.pool.render(env_ids, follow=follow)

    def close(self) -> None:
        self.pool.close()

    def __enter__(self) -> "StackedFrames":
        return self

    def __exit__(self, *exc: object) -> None:
        self.pool.close()


def make_eval_envs(env_id: str, num_envs: int, seed: int, env_kwargs: Optional[Mapping[str, Any]],
                   render: bool = False) -> Any:  # fmt: skip
    """The evaluation pool: ``rlfast.make`` with ``env_kwargs``, whose ``frame_stack: k`` (a user's pixel env) stacks
    k frames here as the Atari trainers do on the device. ``render``: a Python env is made with
    ``render_mode="rgb_array"`` (the engine's envs render without it)."""
    kwargs = dict(env_kwargs or {})
    if render and rlfast.task_family(env_id) == "python":
        kwargs.setdefault("render_mode", "rgb_array")
    stack = kwargs.pop("frame_stack", None)
    envs = rlfast.make(env_id, num_envs, seed=seed, **kwargs)
    return StackedFrames(envs, stack) if stack is not None else envs


def frames_per_second(envs: Any) -> int:
    """A video's frame rate: real time. Atari: 15 (4 frames of 60 Hz a step); MuJoCo: 1 / the env's step time;
    a Python env: 15."""
    family = rlfast.task_family(envs.task_id)
    if family == "mujoco":
        renderer = getattr(getattr(envs, "pool", envs), "_renderer", None)
        if renderer is not None:
            return max(1, round(1.0 / (renderer.model.opt.timestep * renderer.frame_skip)))
    return ATARI_FPS


class Videos:
    """One MP4 per recorded env (``paths[i]`` for env ``env_ids[i]``), a frame appended after each step until the
    env's first episode ends."""

    def __init__(self, envs: Any, paths: Sequence[Path]) -> None:
        try:
            import imageio.v2 as imageio
        except ImportError as e:
            raise ImportError("videos need imageio and its ffmpeg plugin: pip install 'rlfast[video]'") from e
        self.envs, self.paths, self._imageio = envs, [Path(p) for p in paths], imageio
        self.env_ids = list(range(len(self.paths)))
        self._writers: list = []
        self.frames = [0] * len(self.paths)

    def capture(self, recording: torch.Tensor) -> None:
        """Appends the current frame of each recorded env for which ``recording[env]`` is true."""
        ids = [e for e in self.env_ids if bool(recording[e])]
        if not ids:
            return
        frames = self.envs.render(ids, follow=True).numpy()
        if not self._writers:  # the first frames fix the rate (MuJoCo's renderer exists from now on)
            fps = frames_per_second(self.envs)
            for path in self.paths:
                path.parent.mkdir(parents=True, exist_ok=True)
                writer = self._imageio.get_writer(path, fps=fps, codec="libx264", quality=7, macro_block_size=1,
                                                  ffmpeg_log_level="error")  # fmt: skip
                self._writers.append(writer)
        for e, frame in zip(ids, frames):
            self._writers[e].append_data(frame)
            self.frames[e] += 1

    def close(self) -> None:
        for writer in self._writers:
            writer.close()
        self._writers = []


def evaluate(agent: torch.nn.Module, envs: Any, device: torch.device, greedy: bool, obs_normalizer: Any = None,
             videos: Optional[Videos] = None) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Steps every env until each has finished one episode: ``(returns [N], lengths [N])``. ``videos``: records
    the first envs' episodes, a frame after the reset and after every step of each, its last frame included."""
    n = envs.num_envs
    returns, lengths = torch.zeros(n), torch.zeros(n, dtype=torch.int64)
    finished = torch.zeros(n, dtype=torch.bool)
    obs, _ = envs.reset()
    if videos is not None:
        videos.capture(~finished)
    # A recurrent policy's state, zeroed where an episode starts: after a reset step (next-step autoreset).
    state = agent.initial_state(n, device) if hasattr(agent, "initial_state") else None
    starts, done = torch.ones(n, dtype=torch.bool), torch.zeros(n, dtype=torch.bool)
    while not finished.all():
        x = each(lambda o: o.to(device), obs)  # a Dict env's: each key's tensor
        if obs_normalizer is not None:
            x = obs_normalizer(x)
        with torch.no_grad():
            if state is None:
                action = agent.act(x, greedy=greedy)
            else:
                action, state = agent.act(x, greedy=greedy, state=state, starts=starts.to(device))
        obs, _, terminated, truncated, info = envs.step(action.cpu())
        if videos is not None:
            videos.capture(~finished)
        starts, done = done, terminated | truncated
        first = done & ~finished
        returns = torch.where(first, info["episode_return"].float(), returns)
        lengths = torch.where(first, info["episode_length"].long(), lengths)
        finished |= first
    return returns.numpy(), lengths.numpy()


class Evaluator:
    """Evaluation during training (``--eval-every``, ``--eval-episodes``) and its videos (``--capture-video``): every
    ``every`` iterations and after the last, the tracked agent plays ``episodes`` greedy episodes on a pool of its
    own; ``eval/episodic_return`` (mean; Atari: whole games, raw score) and ``eval/episodic_length`` are logged,
    and with ``capture_video`` env 0's episode is written to ``run_dir/videos/step_<N>.mp4``. Off: costs nothing."""

    def __init__(self, env_id: str, seed: int, every: int, episodes: int, capture_video: bool, num_iterations: int,
                 device: torch.device) -> None:  # fmt: skip
        self.env_id, self.seed, self.video, self.device = env_id, seed + EVAL_SEED_OFFSET, capture_video, device
        self.episodes = episodes if every else 1
        self.every = every or (max(1, num_iterations // 10) if capture_video else 0)
        self.num_iterations = num_iterations
        self.envs: Any = None

    @property
    def enabled(self) -> bool:
        return self.every > 0

    def due(self, iteration: int) -> bool:
        return self.enabled and (iteration % self.every == 0 or iteration == self.num_iterations)

    def run(self, state: Mapping[str, Any], run_dir: Path, global_step: int) -> tuple[dict[str, float], Optional[Path]]:
        """One evaluation of ``state["models"]["agent"]`` (with a frozen copy of an obs normalizer): its scalars and
        the video's path (None without --capture-video)."""
        if self.envs is None:
            kwargs = state.get("eval_env_kwargs") or state.get("env_kwargs")
            self.envs = make_eval_envs(self.env_id, self.episodes, self.seed, kwargs, render=self.video)
        normalizer = (state.get("normalizers") or {}).get("obs")
        if normalizer is not None:
            normalizer = copy.deepcopy(normalizer)
            normalizer.update = False
        path = run_dir / "videos" / f"step_{global_step:09d}.mp4" if self.video else None
        videos = Videos(self.envs, [path]) if path is not None else None
        try:
            returns, lengths = evaluate(state["models"]["agent"], self.envs, self.device, greedy=True,
                                        obs_normalizer=normalizer, videos=videos)  # fmt: skip
        finally:
            if videos is not None:
                videos.close()
        return {"eval/episodic_return": float(returns.mean()), "eval/episodic_length": float(lengths.mean())}, path

    def close(self) -> None:
        if self.envs is not None:
            self.envs.close()
            self.envs = None


def gif_summary(tag: str, path: Path, max_frames: int = 200, max_width: int = 240) -> Any:
    """A TensorBoard image summary of the MP4 at ``path`` as an animated GIF (what ``SummaryWriter.add_video`` writes,
    without moviepy): every k-th frame, k so that at most ``max_frames`` remain, shrunk by whole factors to at most
    ``max_width`` pixels wide."""
    import io

    import imageio.v2 as imageio
    from tensorboard.compat.proto.summary_pb2 import Summary

    reader = imageio.get_reader(path)
    fps = reader.get_meta_data().get("fps", 30)
    stride = max(1, -(-reader.count_frames() // max_frames))
    frames = []
    for i, frame in enumerate(reader):  # streamed: a whole Atari game can be 27,000 frames
        if i % stride == 0:
            shrink = max(1, -(-frame.shape[1] // max_width))
            frames.append(frame[::shrink, ::shrink])
    reader.close()
    buffer = io.BytesIO()
    # seconds a frame (imageio's v2 GIF writer): real time, but a long episode thinned to max_frames plays faster
    imageio.mimwrite(buffer, frames, format="GIF", duration=min(stride / fps, 0.1), loop=0)
    h, w, c = frames[0].shape
    image = Summary.Image(height=h, width=w, colorspace=c, encoded_image_string=buffer.getvalue())
    return Summary(value=[Summary.Value(tag=tag, image=image)])
