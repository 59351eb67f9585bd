"""Soak: long runs whose resident memory, open files, threads and child processes must stay flat.

    python benchmarks/bench_soak.py --minutes 30                     # each trainer 30 min (3 h on 2 cores)
    python benchmarks/bench_soak.py --pool-only --minutes 60         # the async pool alone, 1 h
    python benchmarks/bench_soak.py --trainers ppo.py --minutes 2    # one trainer, briefly
    python benchmarks/bench_soak.py --minutes 30 --pool-minutes 60 --together   # all at once: 1 h in all

``--together`` starts every run at once (each gets a share of the cores, so fewer iterations in its time: the
table says how many steps each made); leaks, descriptors, threads and children do not need a core to themselves.

Each trainer runs on a small task with ``--save-minutes 1`` (so checkpoints are written all along) until
``--minutes`` have passed, then gets SIGTERM (it saves and exits with 143). The pool run is 256 CartPole-v1 envs
in async batches of 64 on the C++ threads, plus 16 gymnasium CartPole-v1 envs in worker processes, sent back in
random orders and random subsets. Every ``--every`` seconds this samples the process tree: resident memory (the
trainer and its children, MB), open file descriptors, threads and child processes. The table gives, per run, the
first and last sample after ``--warmup`` minutes, the bound (max - min) and the least-squares slope per hour of
each, and whether it held: memory within ``--rss-bound`` MB, descriptors, threads and children constant.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import tyro

ROOT = Path(__file__).resolve().parents[1]
TRAINERS = {  # script: flags of a small task (1 torch thread; each saves every minute)
    "ppo.py": ["--env-id", "CartPole-v1"],
    "ppo_continuous.py": ["--env-id", "InvertedPendulum-v5"],
    "appo.py": ["--config", "configs/cartpole_appo.toml"],
    "dqn.py": ["--env-id", "CartPole-v1"],
    "ppo_atari.py": ["--env-id", "Pong-v5", "--num-envs", "4"],
    "ppo_atari_lstm.py": ["--env-id", "Pong-v5", "--num-envs", "4", "--num-minibatches", "2"],
    "dqn_atari.py": ["--env-id", "Pong-v5", "--num-envs", "4", "--buffer-size", "20000", "--learning-starts", "2000"],
}


@dataclass
class Args:
    minutes: float = 30.0
    """how long each trainer's run lasts"""
    pool_minutes: Optional[float] = None
    """how long the pool run lasts (default: --minutes)"""
    together: bool = False
    """start every run at once instead of one after the other"""
    trainers: tuple[str, ...] = tuple(TRAINERS)
    """the trainers to soak"""
    pool_only: bool = False
    """only the async pool run"""
    no_pool: bool = False
    """no pool run"""
    every: float = 60.0
    """seconds between samples"""
    warmup: float = 2.0
    """minutes before the samples the verdict looks at (caches, allocator pools and compiled kernels fill up)"""
    rss_bound: float = 64.0
    """MB the resident memory may move after the warm-up"""
    json_out: Optional[str] = None
    """also write every sample here"""


@dataclass
class Series:
    name: str
    t: list[float] = field(default_factory=list)
    rss_mb: list[float] = field(default_factory=list)
    fds: list[int] = field(default_factory=list)
    threads: list[int] = field(default_factory=list)
    children: list[int] = field(default_factory=list)


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            with open(f"/proc/{p}/task/{p}/children") as f:
                todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def sample(pid: int, series: Series, t: float) -> None:
    """Appends the process tree's resident memory, open descriptors and threads, and its child count."""
    pids = tree(pid)
    rss = fds = threads = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/status") as f:
                status = dict(line.split(":", 1) for line in f if ":" in line)
            rss += int(status["VmRSS"].split()[0]) if "VmRSS" in status else 0
            threads += int(status["Threads"])
            fds += len(os.listdir(f"/proc/{p}/fd"))
        except (OSError, KeyError, ValueError):
            continue
    series.t.append(t)
    series.rss_mb.append(rss / 1024)
    series.fds.append(fds)
    series.threads.append(threads)
    series.children.append(len(pids) - 1)


def slope_per_hour(t: list[float], y: list[float]) -> float:
    n = len(t)
    if n < 2:
        return 0.0
    mt, my = sum(t) / n, sum(y) / n
    var = sum((a - mt) ** 2 for a in t)
    return 3600.0 * sum((a - mt) * (b - my) for a, b in zip(t, y)) / var if var else 0.0


def soak_trainer(script: str, args: Args, folder: Path) -> tuple[Series, str]:
    cmd = [sys.executable, str(ROOT / "scripts" / script), *TRAINERS[script], "--total-timesteps", "1000000000",
           "--save-minutes", "1", "--torch-threads", "1", "--runs-dir", str(folder / "runs")]  # fmt: skip
    log = open(folder / "log.txt", "w")
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
    series = soaked(proc.pid, args.minutes, args, script, lambda: proc.poll() is None)
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=120)
    log.close()
    text = (folder / "log.txt").read_text()
    saved = [line for line in text.splitlines() if line.startswith("interrupted at step ")]
    if code == 143 and saved:  # "interrupted at step N (iteration I)": how far it got
        end = saved[-1].split(":")[0].replace("interrupted", "stopped") + ", saved on SIGTERM"
    else:
        end = f"ended with status {code}: {text[-300:]}"
    return series, end


POOL_CODE = """
import random, sys, time, numpy as np, rlfast
rng = random.Random(0)
pools = [rlfast.make("CartPole-v1", 256, batch_size=64), rlfast.make("gymnasium:CartPole-v1", 16, batch_size=4)]
held = [np.zeros(0, np.int32) for _ in pools]  # per pool: envs kept back one round (at most a batch)
for pool in pools:
    pool.async_reset()
print("ready", flush=True)
rounds, end = 0, time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    for k, pool in enumerate(pools):
        *_, info = pool.recv()
        ids = info["env_id"].numpy().copy()
        keep = rng.randrange(0, len(ids) + 1)  # a random part goes back now, the rest with the next round's
        out = np.concatenate([held[k], ids[:keep]]).astype(np.int32)
        held[k] = ids[keep:]
        rng.shuffle(out)
        if len(out):
            pool.send(np.array([rng.randrange(2) for _ in out]), out)
    rounds += 1
print("rounds", rounds, flush=True)
"""


def soak_pool(args: Args, folder: Path) -> tuple[Series, str]:
    minutes = args.minutes if args.pool_minutes is None else args.pool_minutes
    seconds = 60 * minutes + args.every + 5  # it outlives the samples: none of them sees it close
    proc = subprocess.Popen([sys.executable, "-c", POOL_CODE, str(seconds)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip
    first = proc.stdout.readline()  # the clock starts once the pools are built (start-up is not the soak's)
    series = soaked(proc.pid, minutes, args, "async pool", lambda: proc.poll() is None)
    out, _ = proc.communicate(timeout=120)
    out = first + out
    end = out.strip().splitlines()[-1] if proc.returncode == 0 else f"status {proc.returncode}: {out[-300:]}"
    return series, end


def soaked(pid: int, minutes: float, args: Args, name: str, running) -> Series:
    """Samples ``pid``'s tree every ``args.every`` s for ``minutes`` (or until it ends)."""
    series, start = Series(name), time.monotonic()
    while running() and time.monotonic() - start < 60 * minutes:
        time.sleep(min(args.every, max(0.0, 60 * minutes - (time.monotonic() - start))))
        if running():
            sample(pid, series, time.monotonic() - start)
            print(f"{name}: {series.t[-1] / 60:5.1f} min  rss {series.rss_mb[-1]:7.1f} MB  fds {series.fds[-1]}  "
                  f"threads {series.threads[-1]}  children {series.children[-1]}", flush=True)  # fmt: skip
    return series


def verdict(series: Series, args: Args) -> tuple[str, bool]:
    keep = [i for i, t in enumerate(series.t) if t >= 60 * args.warmup]
    if len(keep) < 2:
        return "| too few samples after the warm-up | | | | no |", False
    t = [series.t[i] for i in keep]
    cols, ok = [], True
    for name, values in (("rss_mb", series.rss_mb), ("fds", series.fds), ("threads", series.threads),
                         ("children", series.children)):  # fmt: skip
        v = [values[i] for i in keep]
        bound, slope = max(v) - min(v), slope_per_hour(t, v)
        ok &= bound <= args.rss_bound if name == "rss_mb" else bound == 0
        cols.append(f"{v[0]:.0f} -> {v[-1]:.0f} (bound {bound:.1f}, {slope:+.1f}/h)")
    return "| " + " | ".join(cols) + f" | {'yes' if ok else 'NO'} |", ok


def main(args: Args) -> int:
    with tempfile.TemporaryDirectory(prefix="soak_") as tmp:
        jobs = []
        for script in () if args.pool_only else args.trainers:
            folder = Path(tmp) / script
            folder.mkdir()
            jobs.append((soak_trainer, script, args, folder))
        if not args.no_pool:
            jobs.append((soak_pool, args, Path(tmp)))
        with ThreadPoolExecutor(len(jobs) if args.together else 1) as ex:  # each job waits on its own process
            runs = list(ex.map(lambda job: job[0](*job[1:]), jobs))
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    pool = "" if args.pool_minutes is None else f" (the pool {args.pool_minutes:g})"
    how = "all at once" if args.together else "one after the other"
    print(f"\n{args.minutes:g} min each{pool}, {how}, sampled every {args.every:g} s, verdict after "
          f"{args.warmup:g} min; {cpu}, {os.cpu_count()} cores")
    print("| run | how it ended | RSS MB | open fds | threads | children | flat |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    failed = 0
    for series, end in runs:
        row, ok = verdict(series, args)
        failed += not ok
        print(f"| {series.name} | {end} {row}")
    if args.json_out:
        Path(args.json_out).write_text(json.dumps([vars(s) for s, _ in runs]) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(tyro.cli(Args)))
