"""MuJoCo throughput: rlfast sync/async vs EnvPool sync/async vs gymnasium vs raw mj_step.

Reports physics steps/s (env steps x frame_skip) for each task, plus the raw limit: the
`mujoco` Python bindings' mj_step on one thread and on `--threads` threads (mj_step releases
the GIL), driven by random actions with gymnasium's reset rule so the contact load matches an
RL rollout. Run one configuration per machine and compare ratios, not absolute numbers.

    python scripts/bench_mujoco.py --tasks Ant-v5 HalfCheetah-v5 --threads 2 --seconds 2 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from typing import Callable, Optional

import gymnasium as gym
import mujoco
import numpy as np

import rlfast

FRAME_SKIP = {"Ant-v5": 5, "HalfCheetah-v5": 5, "Hopper-v5": 4, "Walker2d-v5": 4, "Humanoid-v5": 5}


def timed(run: Callable[[], int], seconds: float) -> float:
    """Env steps/s of `run` (which returns env steps done per call), after one warm-up call."""
    run()
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        steps += run()
    return steps / (time.perf_counter() - start)


HEALTHY_Z = {"Ant-v5": (0.2, 1.0), "Humanoid-v5": (1.0, 2.0)}


def build_raw_bench() -> str:
    """Compiles scripts/bench_mj_step.cc against the installed mujoco wheel (cached in /tmp)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from build_tools import mujoco as mujoco_build

    include, lib = mujoco_build.find()
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench_mj_step.cc")
    exe = os.path.join(tempfile.gettempdir(), f"rlfast_bench_mj_step_{mujoco.__version__}")
    if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(src):
        cmd = ["g++", "-O3", "-std=c++17", "-pthread", f"-I{include}", src, lib,
               f"-Wl,-rpath,{os.path.dirname(lib)}", "-o", exe]
        subprocess.run(cmd, check=True)
    return exe


def raw_mj_step(task: str, seconds: float, threads: int) -> float:
    """Env steps/s of bare mj_step x frame_skip in C++ on `threads` threads (see
    scripts/bench_mj_step.cc): no env logic, no pool, no Python."""
    base = gym.make(task).unwrapped
    args = [build_raw_bench(), base.fullpath, str(base.frame_skip), str(threads), str(seconds)]
    args += [str(z) for z in HEALTHY_Z.get(task, ())]
    return float(subprocess.run(args, check=True, capture_output=True, text=True).stdout)


def rlfast_rate(task: str, seconds: float, num_envs: int, batch: int, threads: int) -> float:
    with rlfast.make(task, num_envs=num_envs, batch_size=batch, num_threads=threads) as pool:
        acts = np.random.default_rng(0).uniform(-1, 1, (64, batch, *pool.single_action_space.shape))
        acts = (acts * pool.single_action_space.high).astype(np.float32)
        if batch == num_envs:
            pool.reset()
            step = [0]

            def run() -> int:
                for _ in range(50):
                    pool.step(acts[step[0] % 64])
                    step[0] += 1
                return 50 * batch
        else:
            pool.async_reset()
            step = [0]

            def run() -> int:
                for _ in range(50):
                    _, _, _, _, info = pool.recv()
                    pool.send(acts[step[0] % 64], info["env_id"])
                    step[0] += 1
                return 50 * batch

        return timed(run, seconds)


def envpool_rate(task: str, seconds: float, num_envs: int, batch: int, threads: int) -> Optional[float]:
    try:
        import envpool
    except ImportError:
        return None
    env = envpool.make_gymnasium(task, num_envs=num_envs, batch_size=batch, num_threads=threads)
    acts = np.random.default_rng(0).uniform(-1, 1, (64, batch, *env.action_space.shape)) * env.action_space.high
    step = [0]
    if batch == num_envs:
        env.reset()

        def run() -> int:
            for _ in range(50):
                env.step(acts[step[0] % 64])
                step[0] += 1
            return 50 * batch
    else:
        env.async_reset()

        def run() -> int:
            for _ in range(50):
                info = env.recv()[-1]
                env.send(acts[step[0] % 64], info["env_id"])
                step[0] += 1
            return 50 * batch

    rate = timed(run, seconds)
    env.close()
    return rate


def gymnasium_rate(task: str, seconds: float) -> float:
    env = gym.make(task)
    env.reset(seed=0)
    acts = np.random.default_rng(0).uniform(-1, 1, (64, *env.action_space.shape)) * env.action_space.high
    acts = acts.astype(np.float32)
    step = [0]

    def run() -> int:
        for _ in range(50):
            _, _, term, trunc, _ = env.step(acts[step[0] % 64])
            step[0] += 1
            if term or trunc:
                env.reset()
        return 50

    return timed(run, seconds)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", nargs="+", default=["Ant-v5", "HalfCheetah-v5"])
    p.add_argument("--threads", type=int, default=2, help="worker threads for every pool")
    p.add_argument("--sync-envs", type=int, default=0, help="sync num_envs (default: 4 x threads)")
    p.add_argument("--async-envs", type=int, default=0, help="async num_envs (default: 3 x threads)")
    p.add_argument("--seconds", type=float, default=2.0, help="measured time per row and repeat")
    p.add_argument("--repeat", type=int, default=3, help="round-robin repeats; the median is reported")
    a = p.parse_args()
    t = a.threads
    sync_n, async_n = a.sync_envs or 4 * t, a.async_envs or 3 * t
    print(f"physics steps/s (env steps x frame_skip); {t} threads; sync N={sync_n}; async N={async_n} batch={t}")
    print(f"{'task':16s} {'row':34s} {'physics steps/s':>16s} {'vs raw limit':>12s}")
    for task in a.tasks:
        fs = FRAME_SKIP.get(task, 5)
        rows: list[tuple[str, Callable[[], Optional[float]]]] = [
            (f"raw mj_step, 1 thread (mujoco {mujoco.__version__})", lambda: raw_mj_step(task, a.seconds, 1)),
            (f"raw mj_step, {t} threads", lambda: raw_mj_step(task, a.seconds, t)),
            ("rlfast sync, 1 thread, N=4", lambda: rlfast_rate(task, a.seconds, 4, 4, 1)),
            ("rlfast sync", lambda: rlfast_rate(task, a.seconds, sync_n, sync_n, t)),
            ("rlfast async", lambda: rlfast_rate(task, a.seconds, async_n, t, t)),
            ("envpool sync (its own MuJoCo)", lambda: envpool_rate(task, a.seconds, sync_n, sync_n, t)),
            ("envpool async (its own MuJoCo)", lambda: envpool_rate(task, a.seconds, async_n, t, t)),
            ("gymnasium, 1 env (Python)", lambda: gymnasium_rate(task, a.seconds)),
        ]
        # Rows are measured round-robin, `--repeat` times, and the median kept: on a shared
        # machine, load changes then hit every row alike instead of whichever ran at the time.
        samples: dict[str, list[float]] = {name: [] for name, _ in rows}
        for _ in range(a.repeat):
            for name, measure in rows:
                rate = measure()
                if rate is not None:
                    samples[name].append(rate * fs)
        limit = float(np.median(samples[rows[1][0]]))
        for name, values in samples.items():
            if values:
                rate = float(np.median(values))
                print(f"{task:16s} {name:34s} {rate:16,.0f} {rate / limit:11.0%}")

if __name__ == "__main__":
    main()
