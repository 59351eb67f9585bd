"""What the Python-env pool itself costs per env step: an env whose step does nothing, stepped by rlfast's worker
processes (rlfast/procpool.py), so every microsecond measured is the pool's (the worker's loop, the shared rings,
the main process's send/recv), none the env's. Printed: env steps/s, and CPU time per env step of the main
process and of the workers together (from /proc, clock ticks, over the measured seconds).

    python3 scripts/bench/bench_pyenv_overhead.py                       # N = 256, one worker
    python3 scripts/bench/bench_pyenv_overhead.py --num-envs 8 --num-workers 2
"""

import multiprocessing as mp
import os
import time
from dataclasses import dataclass
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


@dataclass
class Args:
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
    with rlfast.make_from(NullEnv, args.num_envs, batch_size=batch, num_workers=args.num_workers) as pool:
        workers = [p.pid for p in mp.active_children()]  # the pool's worker processes
        actions = np.zeros(batch, np.int64)
        pool.async_reset()
        ids = pool.recv()[-1]["env_id"]
        for seconds in (args.warmup, args.seconds):
            start, main0, work0, steps = time.perf_counter(), time.process_time(), sum(map(cpu_seconds, workers)), 0
            while time.perf_counter() - start < seconds:
                pool.send(actions, ids if batch < args.num_envs else None)
                ids = pool.recv()[-1]["env_id"]
                steps += batch
        wall = time.perf_counter() - start
        main_us = 1e6 * (time.process_time() - main0) / steps
        work_us = 1e6 * (sum(map(cpu_seconds, workers)) - work0) / steps
    print(f"null env, N = {args.num_envs}, batch {batch}, {args.num_workers} worker(s): {steps / wall:,.0f} steps/s; "
          f"CPU per env step: main process {main_us:.2f} us, workers {work_us:.2f} us")


if __name__ == "__main__":
    main(tyro.cli(Args))
