"""What rendering and video cost: ``pool.render()`` per frame beside a step of the same pool, and a training run's
steps/s with and without ``--eval-every`` + ``--capture-video``, in one run on one machine.

    python3 benchmarks/bench_render.py                                   # Pong-v5 and Ant-v5, default sizes
    python3 benchmarks/bench_render.py --iterations 30 --eval-every 10   # longer training runs

Part 1 (frames): a pool of ``--num-envs`` envs per task is stepped with random actions; each round times one
``step`` of all envs and one ``render()`` of all envs (Atari: the emulator's 210x160 colour screen in C++; MuJoCo:
gymnasium's 480x480 view through EGL or OSMesa; a Python env: its own ``render()`` in its worker). Part 2
(training): the trainer with its preset for ``--iterations`` iterations, once as is and once recording a greedy
episode every ``--eval-every`` iterations (and after the last), each in a fresh process; the table gives each
run's steps/s over the whole run (evaluations included: what the user waits for) and the eval section's share.
"""

import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

import numpy as np
import tyro

from trainers import ROOT, SCRIPTS


@dataclass
class Args:
    tasks: list[str] = field(default_factory=lambda: ["Pong-v5", "Ant-v5", "gymnasium:CartPole-v1"])
    """the tasks of part 1 (a gymnasium id in module form: a Python env in workers, made to render)"""
    num_envs: int = 4
    """envs per pool in part 1"""
    rounds: int = 20
    """step + render rounds timed per task (after 5 untimed)"""
    runs: list[str] = field(default_factory=lambda: ["ppo_atari.py:configs/pong_5min.toml",
                                                     "ppo_continuous.py:configs/ant_5min.toml"])  # fmt: skip
    """part 2: script:preset pairs (empty: skip part 2)"""
    iterations: int = 20
    """iterations of each training run"""
    eval_every: int = 10
    """iterations between recorded evaluations in the run with video"""


def frames(args: Args) -> list[str]:
    import torch

    import rlfast

    rows = ["| task | envs | step of all envs | render of all envs | per frame | frame |",
            "| --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for task in args.tasks:
        kwargs = {"render_mode": "rgb_array"} if rlfast.task_family(task) == "python" else {}
        pool = rlfast.make(task, num_envs=args.num_envs, **kwargs)
        space = pool.single_action_space
        pool.reset()
        step_s, render_s = [], []
        for i in range(args.rounds + 5):
            actions = torch.from_numpy(np.stack([space.sample() for _ in range(args.num_envs)]))
            start = time.perf_counter()
            pool.step(actions)
            middle = time.perf_counter()
            frame = pool.render()
            end = time.perf_counter()
            if i >= 5:
                step_s.append(middle - start)
                render_s.append(end - middle)
        pool.close()
        step_ms, render_ms = 1e3 * np.median(step_s), 1e3 * np.median(render_s)
        rows.append(f"| {task} | {args.num_envs} | {step_ms:.3f} ms | {render_ms:.3f} ms | "
                    f"{render_ms / args.num_envs:.3f} ms | {'x'.join(map(str, frame.shape[1:]))} |")  # fmt: skip
    return rows


def plain_steps(preset: str) -> int:
    """Env steps per iteration of a preset (num_envs x num_steps)."""
    import tomllib

    with open(ROOT / preset, "rb") as f:
        values = tomllib.load(f)
    return values.get("num_envs", 8) * values.get("num_steps", 128)


def train(script: str, preset: str, iterations: int, extra: list[str]) -> tuple[float, str]:
    """(steps/s over the whole run, the eval section's share) of ``script --config preset`` for ``iterations``."""
    batch = plain_steps(preset)
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, str(SCRIPTS / script), "--config", str(ROOT / preset),
                               "--total-timesteps", str(batch * iterations), "--save-minutes", "0", *extra],
                              cwd=tmp, capture_output=True, text=True, env=os.environ)  # fmt: skip
        seconds = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{script} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    share = re.search(r"^eval\s+[\d.]+\s+([\d.]+%)", proc.stdout, re.MULTILINE)
    return batch * iterations / seconds, share.group(1) if share else "-"


def main(args: Args) -> int:
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")),
               "unknown CPU")  # fmt: skip
    print(f"machine: {cpu}, {os.cpu_count()} cores\n")
    print("\n".join(frames(args)))
    if not args.runs:
        return 0
    rows = ["| run | iterations | steps/s, as is | steps/s, --eval-every + --capture-video | ratio | eval share | "
            "seconds per recorded episode |", "| --- | --- | --- | --- | --- | --- | --- |"]  # fmt: skip
    for run in args.runs:
        script, preset = run.split(":")
        plain, _ = train(script, preset, args.iterations, [])
        video, share = train(script, preset, args.iterations, ["--eval-every", str(args.eval_every), "--eval-episodes",
                                                                "1", "--capture-video"])  # fmt: skip
        steps = plain_steps(preset) * args.iterations
        evaluations = len({*range(args.eval_every, args.iterations + 1, args.eval_every), args.iterations})
        per_episode = (steps / video - steps / plain) / evaluations
        rows.append(f"| {script} {preset} | {args.iterations} | {plain:,.0f} | {video:,.0f} | {video / plain:.2f}x "
                    f"| {share} | {per_episode:.1f} ({evaluations} recorded) |")  # fmt: skip
        print(f"{script}: {plain:,.0f} -> {video:,.0f} steps/s", flush=True)
    print("\n" + "\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(tyro.cli(Args)))
