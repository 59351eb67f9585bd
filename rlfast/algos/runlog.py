"""What a trainer reports, the same way in every script: tensorboard, a progress line, episodes.

    log = RunLog(run_dir, dataclasses.asdict(args), total_steps=args.num_iterations * args.batch_size)
    ...                                        # one rollout of T steps x B envs
    log.episodes(ep_done, ep_return, ep_length, iteration_step)   # [T, B] host tensors
    log.scalars({"losses/value_loss": v, ...}, global_step)
    log.progress(global_step, final=last_iteration)
    log.close()

Run dirs are ``runs/{env_id}__{exp_name}__{seed}__{time}`` (``run_dir_name``), with the
hyperparameter table as tensorboard text. ``charts/episodic_return`` and
``charts/episodic_length`` are logged at the global step each episode ended, as CleanRL
does; ``charts/SPS`` counts from the end of the first iteration (warm-up and compilation
excluded). The progress line is rewritten in place on a terminal, printed every 10 s otherwise; its
return is ``-`` until an episode has ended.
"""

import re
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any, Mapping, Optional, Union

import torch
from torch.utils.tensorboard import SummaryWriter


def safe_env_id(env_id: str) -> str:
    """``env_id`` as the run dir names it: gymnasium's ``module:Env-v0`` ids and header paths, no ``:`` or ``/``."""
    return env_id.replace(":", "_").replace("/", "_")


def run_dir_name(env_id: str, exp_name: str, seed: int) -> str:
    """``{env_id}__{exp_name}__{seed}__{unix time}``, CleanRL's run name (the id through ``safe_env_id``)."""
    return f"{safe_env_id(env_id)}__{exp_name}__{seed}__{int(time.time())}"


def format_eta(seconds: float) -> str:
    """``h:mm:ss`` (negative clamps to 0)."""
    seconds = int(max(seconds, 0))
    return f"{seconds // 3600:d}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


class RunLog:
    """A run's tensorboard writer, episode window, steps-per-second meter and progress line."""

    def __init__(
        self,
        run_dir: Union[str, Path],
        hyperparameters: Mapping[str, Any],
        total_steps: int,
        start_step: int = 0,
        window: int = 20,
        track: Optional[tuple[str, Optional[str]]] = None,
    ) -> None:
        """``track``: (W&B project, entity): the run also goes to Weights & Biases, which mirrors every TensorBoard
        scalar (``sync_tensorboard``, as CleanRL's ``--track``); a resumed run continues the same W&B run."""
        self.run_dir = Path(run_dir)
        self.wandb = None
        if track is not None:
            import wandb

            run_id = re.sub(r"[^\w-]", "-", self.run_dir.name)
            self.wandb = wandb.init(project=track[0], entity=track[1], name=self.run_dir.name, id=run_id,
                                    resume="allow", config=dict(hyperparameters), sync_tensorboard=True,
                                    dir=str(self.run_dir))  # fmt: skip
        self.writer = SummaryWriter(str(self.run_dir))
        self.writer.add_text(
            "hyperparameters",
            "|param|value|\n|-|-|\n" + "\n".join(f"|{k}|{v}|" for k, v in hyperparameters.items()),
        )
        self.total_steps = total_steps
        self.recent: deque = deque(maxlen=window)
        self.start_step, self.start_time = start_step, time.perf_counter()
        self._sps_step: Optional[int] = None  # set at the first progress() call (end of the warm-up iteration)
        self._sps_time = 0.0
        self.sps = 0.0
        self._last_print = float("-inf")
        self._tty = sys.stdout.isatty()
        self._closed = False

    @property
    def mean_return(self) -> float:
        """Mean return of the last ``window`` episodes (NaN before the first)."""
        return sum(self.recent) / len(self.recent) if self.recent else float("nan")

    @property
    def window_full(self) -> bool:
        return len(self.recent) == self.recent.maxlen

    def episodes(
        self, ep_done: torch.Tensor, ep_return: torch.Tensor, ep_length: torch.Tensor, iteration_step: int
    ) -> None:
        """Logs the episodes that ended in a rollout: ``ep_done`` [T, B] bool, the others [T, B].

        Row t of the rollout ended at global step ``iteration_step + (t + 1) * B``. One host
        read per rollout (the tensors should already be on the CPU).
        """
        num_envs = ep_done.shape[1]
        steps_idx, _ = ep_done.nonzero(as_tuple=True)
        for t, r, n in zip(steps_idx.tolist(), ep_return[ep_done].tolist(), ep_length[ep_done].tolist()):
            step = iteration_step + (t + 1) * num_envs
            self.writer.add_scalar("charts/episodic_return", r, step)
            self.writer.add_scalar("charts/episodic_length", n, step)
            self.recent.append(r)

    def scalars(self, values: Mapping[str, Union[float, torch.Tensor]], global_step: int) -> None:
        """``add_scalar`` for each tag (tensors are read back here: call once per iteration)."""
        for tag, value in values.items():
            self.writer.add_scalar(tag, float(value), global_step)

    def video(self, path: Optional[Path], global_step: int) -> None:
        """Logs an episode's MP4 (None: nothing): to TensorBoard as an animated GIF (``videos/episode``, thinned to
        at most 200 frames of at most 240 pixels), and as the video itself to W&B under --track."""
        if path is None:
            return
        from rlfast.algos.evaluation import gif_summary

        self.writer._get_file_writer().add_summary(gif_summary("videos/episode", path), global_step)
        if self.wandb is not None:
            import wandb

            self.wandb.log({"videos/episode": wandb.Video(str(path), format="mp4"), "global_step": global_step})

    def progress(self, global_step: int, final: bool = False) -> float:
        """Updates SPS (logged as ``charts/SPS``), prints the progress line when due; returns SPS."""
        now = time.perf_counter()
        if self._sps_step is None:  # end of the first iteration: SPS counts from here on
            self.sps = (global_step - self.start_step) / max(now - self.start_time, 1e-9)
            self._sps_step, self._sps_time = global_step, now
        elif global_step > self._sps_step:
            self.sps = (global_step - self._sps_step) / max(now - self._sps_time, 1e-9)
        self.writer.add_scalar("charts/SPS", self.sps, global_step)
        if final or now - self._last_print >= (0.5 if self._tty else 10.0):
            self._last_print = now
            eta = (self.total_steps - global_step) / max(self.sps, 1e-9)
            ret = f"{self.mean_return:7.2f} (last {len(self.recent)} ep)" if self.recent else f"{'-':>7}"
            line = (
                f"step {global_step:>10,}/{self.total_steps:,} | {self.sps:>8,.0f} SPS | "
                f"ETA {format_eta(eta)} | return {ret}"
            )
            print(f"\r{line}", end="", flush=True) if self._tty else print(line, flush=True)
        return self.sps

    def elapsed(self) -> float:
        """Seconds since this log was created."""
        return time.perf_counter() - self.start_time

    def close(self) -> None:
        """Ends the progress line and flushes tensorboard; idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._tty:
            print(flush=True)
        self.writer.close()
        if self.wandb is not None:
            self.wandb.finish()
