"""VizDoom throughput side by side: rlfast's pool vs gymnasium's AsyncVectorEnv vs Sample Factory's own sampler.

The same scenario, the same N envs, the machine's cores; random actions; each contender in a fresh process, for a
fixed wall-clock budget after a warm-up (as ``benchmarks/bench_pyenvs.py``):

  single        one ``rlfast.vizdoom`` env stepped in a plain loop in one process: the single-env limit (x cores)
  rlfast        ``rlfast.make("rlfast.vizdoom:<id>", N)``: worker processes (one per core), all N envs per send/recv
  rlfast-async  the same with batch_size = N / 2 (half the envs step while the other half is handed back)
  gym-async     gymnasium's ``AsyncVectorEnv(shared_memory=True)`` of the same env: one process per env
  sf-single     one of Sample Factory's own envs of the scenario in a plain loop (its own single-env limit)
  sf-sampler    Sample Factory's sampler (``SyncSamplingAPI``: a rollout worker per core stepping its envs in two
                halves, an inference worker, shared buffers) on its own envs of the scenario, with a policy that costs
                next to nothing (``benchmarks/sf_sampler_vizdoom.py`` says exactly what runs)

Sample Factory pins numpy < 2 and gymnasium < 1.0, so it runs from a venv of its own (``--sf-python``; made with
``python3 -m venv venv-sf && venv-sf/bin/pip install torch==2.13.0 'sample-factory[vizdoom]==2.1.1'``);
without it its rows say why. Its env is its own build of the scenario (its .cfg and wrappers; rlfast.vizdoom
follows them, ``rlfast/vizdoom.py``), so its share is given against its own ``sf-single`` too.

Each env is two processes: the Python env and the VizDoom engine it drives (vizdoom's own executable, one step a
request through shared memory); the engine's time counts as the env's, as in every contender. Printed: the machine,
then per scenario one table: env steps/s (and frames/s: x4, the frame skip) per contender and
N, and each one's share of single x cores. ``--repeats k`` runs every measurement k times, interleaved, and reports
the median. Other work on the machine moves single runs (and takes more from a contender with fewer runnable
processes): each run waits until other work (outside this benchmark, at nice <= 0: /proc/stat less this
benchmark's own CPU time) uses at most ``--quiet`` cores, and a run during which it used more is run again; what it
used is printed with each run, and a median with a run it disturbed all the same is marked *.

    python3 benchmarks/bench_vizdoom.py                                   # Basic and HealthGatheringSupreme
    python3 benchmarks/bench_vizdoom.py --scenarios DoomBasic-v0 --num-envs 8 --seconds 3
"""

from __future__ import annotations

import json
import os
import platform
import re
import resource
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Optional

import gymnasium as gym
import numpy as np
import tyro
# benchmarks/bench_envs.py (this folder is on the path when the script runs)
from bench_envs import ChildDied, Stepper, measure, run_in_child, single_stepper

import rlfast

CONTENDERS = ("single", "rlfast", "rlfast-async", "gym-async", "sf-single", "sf-sampler")
SF_SCRIPT = Path(__file__).resolve().parent / "sf_sampler_vizdoom.py"


@dataclass
class Args:
    scenarios: tuple[str, ...] = ("DoomBasic-v0", "DoomHealthGatheringSupreme-v0")
    """rlfast.vizdoom ids (``rlfast.vizdoom.SCENARIOS``)"""
    num_envs: tuple[int, ...] = (8, 32)
    """the vector sizes N (even, and a multiple of twice the cores for Sample Factory's two halves per worker)"""
    contenders: tuple[str, ...] = CONTENDERS
    """which contenders to run (see the docstring)"""
    seconds: float = 6.0
    """measured wall-clock seconds per run"""
    warmup: float = 2.0
    """unmeasured seconds before that"""
    repeats: int = 1
    """runs of every measurement (interleaved); the median is reported"""
    sf_python: str = "venv-sf/bin/python"
    """the Python of a venv with sample-factory[vizdoom] 2.x (Sample Factory's rows say why when it cannot run)"""
    quiet: float = 0.25
    """cores other work may use (outside this benchmark, at nice <= 0) during a run: a run waits until the machine
    is that quiet, and one during which other work used more is run again (--retries times), else marked *"""
    wait_quiet: float = 600.0
    """seconds a run waits at most for a quiet machine (then it runs, marked *)"""
    retries: int = 2
    """runs again of a run that other work disturbed"""
    sf_niceness: int = -10
    """Sample Factory's --default_niceness: it renices its rollout workers to this + 10 and its inference worker
    to + 2; its default 0 would run the workers at nice 10, behind every other contender's nice 0 where other work
    shares the machine, so -10 (root only; elsewhere it says so and the workers stay at 0)"""
    seed: int = 0


def draw_actions(space: gym.Space, n: int, seed: int, as_float: bool, count: int = 64) -> list[np.ndarray]:
    """``count`` pre-drawn batches of ``n`` random actions; MultiDiscrete as float32 rows for rlfast's pool."""
    rng = np.random.default_rng(seed)
    if isinstance(space, gym.spaces.Discrete):
        return [rng.integers(0, space.n, n) for _ in range(count)]
    rows = [rng.integers(0, space.nvec, (n, len(space.nvec))) for _ in range(count)]
    return [r.astype(np.float32) for r in rows] if as_float else rows


def stepper(name: str, sid: str, n: int, seed: int) -> Stepper:
    """Contender ``name`` (of rlfast's env) with ``n`` envs of ``sid``, reset and ready to step."""
    import rlfast.vizdoom  # noqa: F401 - registers the ids (in the child: the parent never makes a Doom env)

    cores = len(os.sched_getaffinity(0))
    i = 0
    if name == "single":
        env = gym.make(sid)
        env.reset(seed=seed)
        return single_stepper(env, draw_actions(env.action_space, 1, seed, False))
    if name.startswith("rlfast"):
        batch = n // 2 if name == "rlfast-async" else n
        pool = rlfast.make(f"rlfast.vizdoom:{sid}", n, batch_size=batch, seed=seed)
        acts = draw_actions(pool.single_action_space, batch, seed, True)
        pool.async_reset()
        ids = pool.recv()[-1]["env_id"]

        def pooled() -> int:
            nonlocal i, ids
            pool.send(acts[i % len(acts)], ids)
            ids = pool.recv()[-1]["env_id"]
            i += 1
            return batch

        return Stepper(pooled, pool.close, n, batch, min(cores, n))
    venv = gym.vector.AsyncVectorEnv([partial(gym.make, sid)] * n, shared_memory=True)
    venv.reset(seed=seed)
    acts = draw_actions(venv.single_action_space, n, seed, False)

    def vector() -> int:
        nonlocal i
        venv.step(acts[i % len(acts)])
        i += 1
        return n

    return Stepper(vector, venv.close, n, n, n)


def measure_rlfast_side(name: str, sid: str, n: int, args: Args) -> float:
    s = stepper(name, sid, n, args.seed)
    try:
        steps, secs = measure(s, args.warmup, args.seconds)
    finally:
        s.close()
    return steps / secs


def measure_sf(name: str, sid: str, n: int, args: Args) -> float:
    """Sample Factory's sampler (or, ``sf-single``, its env alone) run by its own Python; steps/s."""
    import rlfast.vizdoom as rv

    cores = len(os.sched_getaffinity(0))
    cmd = [args.sf_python, str(SF_SCRIPT), "--env", rv.SCENARIOS[sid].sf_name, "--seconds", str(args.seconds),
           "--warmup", str(args.warmup)]  # fmt: skip
    if name == "sf-single":
        cmd.append("--single")
    else:
        cmd += ["--num-workers", str(cores), "--envs-per-worker", str(n // cores), "--niceness", str(args.sf_niceness)]
    with tempfile.TemporaryDirectory() as cwd:  # where ZDoom writes its _vizdoom.ini
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.warmup + args.seconds + 300, cwd=cwd)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        raise RuntimeError(f"exit status {proc.returncode}: {tail}")
    got = json.loads(lines[-1])
    return got["steps"] / got["seconds"]


def busy_seconds() -> float:
    """CPU seconds the machine has spent in user and system mode at nice <= 0 (/proc/stat; nice > 0 is apart)."""
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    return (int(fields[0]) + int(fields[2])) / os.sysconf("SC_CLK_TCK")


def own_seconds() -> float:
    """CPU seconds of this process and every descendant it has reaped (each run's processes, once it ended)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def wait_quiet(args: Args) -> bool:
    """Waits until other work uses at most --quiet cores over 2 s (at most --wait-quiet s); whether it is quiet."""
    deadline = time.monotonic() + args.wait_quiet
    while True:
        busy, own, start = busy_seconds(), own_seconds(), time.monotonic()
        time.sleep(2.0)
        others = (busy_seconds() - busy - (own_seconds() - own)) / (time.monotonic() - start)
        if others <= args.quiet:
            return True
        if time.monotonic() > deadline:
            return False


def sf_version(args: Args) -> tuple[Optional[str], Optional[str]]:
    """(Sample Factory's version in ``--sf-python``, None) or (None, why its rows cannot run here)."""
    if not Path(args.sf_python).exists():
        return None, f"no Python at --sf-python {args.sf_python} (make the venv as the docstring says)"
    code = "import importlib.metadata as m, sample_factory, vizdoom; print(m.version('sample-factory'))"
    proc = subprocess.run([args.sf_python, "-c", code], capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        return None, f"sample_factory or vizdoom does not import there: {proc.stderr.strip().splitlines()[-1]}"
    return proc.stdout.strip(), None


def machine() -> str:
    """The CPU model, its cores and its AVX-512 / AMX flags (lscpu), the load, the packages' versions."""
    try:
        lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        lscpu = ""
    model = re.search(r"Model name:\s*(.+)", lscpu)
    flags = re.search(r"Flags:\s*(.+)", lscpu)
    wide = sorted(f for f in (flags.group(1).split() if flags else []) if f.startswith(("avx512", "amx")))
    import vizdoom

    load = os.getloadavg()
    return (f"machine: {model.group(1).strip() if model else platform.processor()}, "
            f"{len(os.sched_getaffinity(0))} cores, flags: {' '.join(wide) or 'no avx512/amx'}\n"
            f"load average before the runs: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}\n"
            f"vizdoom {vizdoom.__version__}, gymnasium {gym.__version__}, rlfast {rlfast.__version__}, "
            f"Python {platform.python_version()}")  # fmt: skip


def main(args: Args) -> dict[str, dict[str, dict[int, Optional[float]]]]:
    cores = len(os.sched_getaffinity(0))
    print(machine(), flush=True)
    print(f"VizDoom env steps/s (random actions, frame skip 4), each contender in a fresh process; {args.seconds:g} s "
          f"after {args.warmup:g} s warm-up, median of {args.repeats}", flush=True)  # fmt: skip
    notes: list[str] = []
    version, problem = sf_version(args) if any(c.startswith("sf-") for c in args.contenders) else (None, None)
    if version:
        print(f"sample-factory {version} ({args.sf_python})", flush=True)
    if problem:
        notes.append(f"Sample Factory's rows: not run, {problem}")
    out: dict[str, dict[str, dict[int, Optional[float]]]] = {}
    for sid in args.scenarios:
        runs: dict[str, dict[int, list[float]]] = {c: {} for c in args.contenders}
        disturbed: dict[str, dict[int, bool]] = {c: {} for c in args.contenders}
        for _ in range(args.repeats):  # interleaved, so that a slow minute of the machine hits every contender
            for name in args.contenders:
                for n in (1,) if name.endswith("single") else args.num_envs:
                    if name.startswith("sf-") and problem:
                        continue
                    timeout = args.warmup + args.seconds + 300
                    for attempt in range(1 + args.retries):
                        quiet = wait_quiet(args)
                        busy, own, start = busy_seconds(), own_seconds(), time.monotonic()
                        try:
                            if name.startswith("sf-"):
                                rate = measure_sf(name, sid, n, args)
                            else:
                                rate = run_in_child(partial(measure_rlfast_side, name, sid, n, args), timeout)
                        except (ChildDied, RuntimeError, subprocess.TimeoutExpired) as e:
                            notes.append(f"{sid} {name} N={n}: {e}")
                            print(f"  {sid} {name} N={n}: {e}", flush=True)
                            break
                        # Other work during the run, from its start to its processes' end (theirs is counted once
                        # reaped): what it took from the contender's cores.
                        # /proc/stat counts in clock ticks (10 ms), rusage exactly: a short run can come out < 0.
                        others = max(0.0, busy_seconds() - busy - (own_seconds() - own)) / (time.monotonic() - start)
                        clean = quiet and others <= args.quiet
                        print(f"  {sid} {name} N={n}: {rate:,.0f} steps/s (other work: {others:.2f} cores"
                              f"{'' if clean else ', disturbed'})", flush=True)  # fmt: skip
                        if clean or attempt == args.retries:
                            runs[name].setdefault(n, []).append(rate)
                            if not clean:
                                disturbed[name][n] = True
                            break
        rates = {c: {n: statistics.median(r) for n, r in by_n.items()} for c, by_n in runs.items()}
        out[sid] = rates
        print(format_table(sid, rates, args.num_envs, cores, disturbed))
    load = os.getloadavg()
    print(f"\nload average after the runs: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    if notes:
        print("\nnotes:\n" + "\n".join(f"- {n}" for n in notes))
    return out


def format_table(sid: str, rates: dict[str, dict[int, float]], sizes: tuple[int, ...], cores: int,
                 disturbed: Optional[dict[str, dict[int, bool]]] = None) -> str:
    """One table: steps/s (frames/s) per contender and N, and the share of single x cores (Sample Factory's sampler
    also of its own env's single x cores); * marks a median with a run that other work disturbed."""
    disturbed = disturbed or {}
    single, sf_single = rates.get("single", {}).get(1), rates.get("sf-single", {}).get(1)
    head = f"\n{sid}, {cores} cores"
    if single:
        mark = "*" if disturbed.get("single", {}).get(1) else ""
        head += f"; single-env limit: {single:,.0f}{mark} steps/s x {cores} cores = {single * cores:,.0f}"
    if sf_single:
        head += f" (Sample Factory's env alone: {sf_single:,.0f} steps/s)"
    lines = [head, "| contender | " + " | ".join(f"N = {n}: steps/s (frames/s) | share of single x cores"
                                                 for n in sizes) + " |",
             "| --- | " + " | ".join("---: | ---:" for _ in sizes) + " |"]  # fmt: skip
    for name, by_n in rates.items():
        if name.endswith("single") or not by_n:
            continue
        cells = []
        for n in sizes:
            r = by_n.get(n)
            share = f"{r / (single * min(cores, n)):.0%}" if r and single else "-"
            if r and name == "sf-sampler" and sf_single:
                share += f" ({r / (sf_single * min(cores, n)):.0%} of its own env's)"
            mark = "*" if disturbed.get(name, {}).get(n) else ""
            cells.append(f"{r:,.0f}{mark} ({4 * r:,.0f}) | {share}" if r else "- | -")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main(tyro.cli(Args))
