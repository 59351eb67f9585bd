"""What the Python-env pool itself costs per env step: an env whose step does nothing, stepped by rlfast's worker
processes (rlfast/procpool.py), so every microsecond measured is the pool's (the worker's loop, the shared rings,
the main process's send/recv), none the env's. Printed: env steps/s, and CPU time per env step of the main
process and of the workers together (from /proc, clock ticks, over the measured seconds).

With ``--task`` (a gymnasium id) the envs are that env instead, and the line says where a real env's time goes:
besides the above, each worker's busy share of a core, and the env's own ``step`` and ``reset`` times inside the
workers (timed around the calls) against the same env stepped alone in a plain loop in a forked process.

    python3 benchmarks/bench_pyenv_overhead.py                       # N = 256, one worker
    python3 benchmarks/bench_pyenv_overhead.py --num-envs 8 --num-workers 2
    python3 benchmarks/bench_pyenv_overhead.py --task LunarLander-v3 --num-envs 8 --num-workers 2 --batch-size 4
"""

import multiprocessing as mp
import os
import tempfile
import time
from dataclasses import dataclass
from functools import partial
from typing import Optional

import gymnasium as gym
import numpy as np
import tyro

import rlfast


class NullEnv(gym.Env):
    """Observations of 8 zeros, 4 actions, no reward, no end: a step costs a Python call and nothing else."""

    observation_space = gym.spaces.Box(-1, 1, (8,), np.float32)
    action_space = gym.spaces.Discrete(4)

    def __init__(self) -> None:
        self.obs = np.zeros(8, np.float32)

    def reset(self, *, seed=None, options=None):
        return self.obs, {}

    def step(self, action):
        return self.obs, 0.0, False, False, {}


class Timed(gym.Wrapper):
    """``env`` with its ``step`` and ``reset`` calls timed; the totals go to a file in ``folder`` when it closes
    (the pool closes its envs in the workers)."""

    def __init__(self, env: gym.Env, folder: str) -> None:
        super().__init__(env)
        self.folder, self.times = folder, np.zeros(4)  # step seconds, steps, reset seconds, resets

    def step(self, action):
        start = time.perf_counter()
        out = self.env.step(action)
        self.times[:2] += (time.perf_counter() - start, 1)
        return out

    def reset(self, **kwargs):
        start = time.perf_counter()
        out = self.env.reset(**kwargs)
        self.times[2:] += (time.perf_counter() - start, 1)
        return out

    def close(self) -> None:
        np.save(os.path.join(self.folder, f"{os.getpid()}_{id(self)}.npy"), self.times)
        super().close()


def timed_env(task: str, folder: str) -> gym.Env:
    return Timed(gym.make(task), folder)


def alone(task: str, seconds: float, folder: str) -> None:
    """The env stepped alone in a plain loop (random actions, reset at each end) for ``seconds``: its totals."""
    env = timed_env(task, folder)
    env.reset(seed=0)
    env.action_space.seed(0)
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        if terminated or truncated:
            env.reset()
    env.close()


def totals(folder: str) -> np.ndarray:
    """The summed totals of every timed env that closed into ``folder``."""
    return sum((np.load(os.path.join(folder, f)) for f in os.listdir(folder)), np.zeros(4))


def per_call(t: np.ndarray) -> tuple[float, float]:
    """Microseconds per ``step`` and per ``reset`` of ``totals``."""
    return 1e6 * t[0] / max(t[1], 1), 1e6 * t[2] / max(t[3], 1)


@dataclass
class Args:
    task: Optional[str] = None
    """a gymnasium id to step instead of the env that does nothing (its actions random, drawn once)"""
    num_envs: int = 256
    num_workers: int = 1
    batch_size: Optional[int] = None
    """envs per recv (None: all, sync mode)"""
    seconds: float = 4.0
    warmup: float = 1.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(args: Args) -> None:
    batch = args.batch_size or args.num_envs
    with tempfile.TemporaryDirectory(prefix="rlfast_overhead_") as tmp:
        print(measure(args, batch, os.path.join(tmp, "pool"), os.path.join(tmp, "alone")))


def measure(args: Args, batch: int, inside: str, solo: str) -> str:
    """The result line; the timed envs' totals go to the folders ``inside`` (the pool's) and ``solo`` (alone)."""
    os.mkdir(inside)
    os.mkdir(solo)
    make = NullEnv if args.task is None else partial(timed_env, args.task, inside)
    with rlfast.make_from(make, args.num_envs, batch_size=batch, num_workers=args.num_workers) as pool:
        workers = [p.pid for p in mp.active_children()]  # the pool's worker processes
        pool.single_action_space.seed(0)
        actions = [np.stack([pool.single_action_space.sample() for _ in range(batch)]) for _ in range(16)]
        pool.async_reset()
        ids = pool.recv()[-1]["env_id"]
        for seconds in (args.warmup, args.seconds):
            start, main0, steps = time.perf_counter(), time.process_time(), 0
            work0 = [cpu_seconds(w) for w in workers]
            while time.perf_counter() - start < seconds:
                pool.send(actions[steps // batch % len(actions)], ids if batch < args.num_envs else None)
                ids = pool.recv()[-1]["env_id"]
                steps += batch
        wall = time.perf_counter() - start
        main_us = 1e6 * (time.process_time() - main0) / steps
        busy = [(cpu_seconds(w) - w0) / wall for w, w0 in zip(workers, work0)]
    work_us = 1e6 * sum(busy) * wall / steps
    name = "null env" if args.task is None else args.task
    line = (f"{name}, N = {args.num_envs}, batch {batch}, {args.num_workers} worker(s): {steps / wall:,.0f} steps/s; "
            f"CPU per env step: main process {main_us:.2f} us, workers {work_us:.2f} us")  # fmt: skip
    if args.task is not None:  # the workers' envs closed into ``inside`` with the pool
        child = mp.get_context("fork").Process(target=alone, args=(args.task, args.seconds, solo))
        child.start()
        child.join()
        alone_totals = totals(solo)
        (step_in, reset_in), (step_alone, reset_alone) = per_call(totals(inside)), per_call(alone_totals)
        line += (f"; workers busy {' / '.join(f'{b:.2f}' for b in busy)} of a core; env.step {step_in:.1f} us, "
                 f"reset {reset_in:.0f} us in the workers, {step_alone:.1f} us / {reset_alone:.0f} us alone "
                 f"({alone_totals[1] / max(alone_totals[3], 1):.0f} steps a reset)")  # fmt: skip
    return line


if __name__ == "__main__":
    main(tyro.cli(Args))
