"""Environment throughput, side by side: rlfast's pool vs EnvPool, ale-py, gymnasium and the raw engine.

Every contender runs the same task on the same machine in one process run, stepping pre-drawn
random actions (no policy), for a fixed wall-clock budget after a warm-up. Ratios are taken
inside this run only, never across runs. Units, per family:
  classic control  env steps/s (one step = one action applied to one env)
  Atari            emulator frames/s = env steps/s x frame_skip (4), as the EnvPool paper counts
  MuJoCo           env steps/s; one env step = frame_skip mj_step calls (5 for Ant, HalfCheetah)

    python benchmarks/bench_envs.py                                  # CartPole-v1, 8 envs
    python benchmarks/bench_envs.py --tasks Pong-v5 --seconds 3      # N = 4 x cores, batch = cores
    python benchmarks/bench_envs.py --tasks Pong-v5 --num-envs 1     # single env
    python benchmarks/bench_envs.py --tasks Ant-v5 HalfCheetah-v5
    python benchmarks/bench_envs.py --tasks Pong-v5 --plot pong.png --threads-sweep 1 2
    python benchmarks/bench_envs.py --tasks Pong-v5 Ant-v5 CartPole-v1 --json out.json
    python benchmarks/bench_envs.py --tasks SpaceInvaders-v5 --startup 512 --contenders   # start-up only

Contenders (those whose package or task is missing are skipped with a note):
  raw-1core       the engine alone on one core. Atari: ALE act() in a loop; MuJoCo: mj_step x
                  frame_skip in a C loop (benchmarks/bench_mj_step.cc, compiled on first use)
  raw-limit       the same on every core at once (one process, MuJoCo: thread, per core): the
                  machine's limit
  rlfast-sync     rlfast.make(task, N), all N envs per send/recv
  rlfast-async    rlfast.make(task, N, batch_size=B), B envs per send/recv
  rlfast-async-wir  the same with work_in_recv=True and one worker thread fewer: recv() steps
                  queued envs on the calling thread while it waits, which makes up the count
  envpool-sync    envpool.make(task, "gymnasium", N) (MuJoCo: EnvPool's own MuJoCo build)
  envpool-async   the same with batch_size=B
  ale-sync        ale_py.vector_env.AtariVectorEnv(game, N) (Atari)
  ale-async       the same with batch_size=B
  gym-sync        gymnasium SyncVectorEnv, one Python loop (classic control, MuJoCo)
  gym-async       gymnasium AsyncVectorEnv, one subprocess per env (Atari: ale-py env +
                  AtariPreprocessing + FrameStackObservation, the same preprocessing less
                  the FIRE reset; needs opencv-python)
  rlfast-n1       rlfast with N=1, one thread (Atari)
  rlfast-n1-wir   rlfast with N=1, work_in_recv=True and no worker thread: each step runs inside
                  recv() on the calling thread (Atari)
  envpool-n1      EnvPool with N=1, one thread (Atari)

Start-up (--startup N): seconds to make N envs and to reset them once, for rlfast, EnvPool and
ale-py's vector env (Atari), each made in a fresh forked process (imports already done) on the
pool's default threads (--num-threads to choose), best of --rounds.
"""

from __future__ import annotations

import glob
import importlib.metadata
import importlib.util
import json
import multiprocessing as mp
import os
import queue
import subprocess
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass, replace
from functools import partial
from typing import Any, Callable, Optional

import gymnasium as gym
import numpy as np
import tyro

import rlfast
from rlfast import _mujoco
from rlfast._ext import _C
from rlfast.registry import check_task_id

CORES = os.cpu_count() or 1


@dataclass
class Args:
    tasks: tuple[str, ...] = ("CartPole-v1",)
    """task ids to benchmark (each must exist in rlfast; peers that lack it are skipped)"""
    num_envs: Optional[int] = None
    """envs N of every pool (default: classic control 8; Atari and MuJoCo 4 x threads)"""
    batch_size: Optional[int] = None
    """async batch size B (default: classic control N // 2; Atari and MuJoCo one env per thread)"""
    num_threads: Optional[int] = None
    """worker threads of every pool and processes of raw-limit (default: min(cores, N); raw-limit: cores)"""
    seconds: float = 3.0
    """measured wall-clock budget per contender"""
    warmup: Optional[float] = None
    """unmeasured seconds per contender first (default: classic control 0.5 s, Atari and MuJoCo 1 s)"""
    rounds: int = 1
    """runs of every contender, interleaved so load from other processes hits all alike; the best is kept"""
    contenders: Optional[tuple[str, ...]] = None
    """which contenders to run, in this order (default: all that apply to the task's family)"""
    json: Optional[str] = None
    """also write the results to this JSON file"""
    plot: Optional[str] = None
    """write a PNG of rate vs threads (rlfast-async[-wir], envpool-async, raw-limit) to this file"""
    threads_sweep: Optional[tuple[int, ...]] = None
    """thread counts of the --plot sweep (default 1 .. cores); N and B follow the family defaults"""
    seed: int = 0
    """seed for envs and the pre-drawn actions"""
    startup: Optional[int] = None
    """also time make() and the first reset() of this many envs per task (rlfast, EnvPool, ale-py vector)"""
    import_mujoco: bool = False
    """import the `mujoco` Python package in every contender's process first (see run_in_child)"""


@dataclass(frozen=True)
class Family:
    """Per-family defaults and the unit of the reported rate."""

    unit: str
    explained: str
    envs_per_thread: int
    """default N = envs_per_thread x threads; 0: a fixed 8 envs"""
    warmup: float


FAMILIES = {
    "classic_control": Family("steps/s", "env steps/s", 0, 0.5),
    "atari": Family("frames/s", "emulator frames/s = env steps/s x {skip}", 4, 1.0),
    "mujoco": Family("steps/s", "env steps/s, 1 env step = {skip} mj_step", 4, 1.0),
}


@dataclass(frozen=True)
class Setup:
    """One task's configuration, handed to every contender (and pickled to raw worker processes)."""

    task: str
    family: str
    num_envs: int
    batch_size: int
    threads: int
    cores: int
    """cores raw-limit runs on (Atari: processes, MuJoCo: threads)"""
    seed: int
    seconds: float
    warmup: float
    import_mujoco: bool = False

    @property
    def frame_skip(self) -> int:
        return int(_C.task_defaults(self.task).get("frame_skip", 1))

    @property
    def scale(self) -> int:
        """Reported units per env step: emulator frames for Atari, else 1."""
        return self.frame_skip if self.family == "atari" else 1


def make_setup(task: str, args: Args, threads: Optional[int] = None) -> Setup:
    """Fills in the family defaults; `threads` (the sweep) overrides --num-threads."""
    family = _C.task_family(task)
    per_thread = FAMILIES[family].envs_per_thread
    t = threads or args.num_threads
    n = args.num_envs or (per_thread * (t or CORES) if per_thread else 8)
    t = t or min(CORES, n)
    b = args.batch_size or (min(t, n) if per_thread else max(1, n // 2))
    warmup = args.warmup if args.warmup is not None else FAMILIES[family].warmup
    return Setup(
        task, family, n, b, t, threads or args.num_threads or CORES, args.seed, args.seconds, warmup, args.import_mujoco
    )


@dataclass
class Result:
    task: str
    contender: str
    num_envs: int
    batch_size: int
    threads: int
    steps: int
    seconds: float
    scale: int = 1
    note: str = ""

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else 0.0

    @property
    def rate(self) -> float:
        """In the family's unit: frames/s for Atari, env steps/s otherwise."""
        return self.steps_per_s * self.scale


@dataclass
class Stepper:
    """One contender ready to run: `advance()` does one call and returns the env steps it made."""

    advance: Callable[[], int]
    close: Callable[[], None]
    num_envs: int
    batch: int
    threads: int


def single_stepper(env: gym.Env, actions: list[np.ndarray]) -> Stepper:
    """One gymnasium env, already reset, stepped with the first action of each of ``actions`` in turn and reset
    at each episode's end: the single-env limit of bench_pyenvs.py and bench_vizdoom.py."""
    i = 0

    def single() -> int:
        nonlocal i
        _, _, term, trunc, _ = env.step(actions[i % len(actions)][0])
        if term or trunc:
            env.reset()
        i += 1
        return 1

    return Stepper(single, env.close, 1, 1, 1)


def draw_actions(space: gym.Space, n: int, seed: int, count: int = 64) -> list[np.ndarray]:
    """`count` pre-drawn batches of n random actions, cycled through during the run."""
    rng = np.random.default_rng(seed)
    if isinstance(space, gym.spaces.Discrete):
        return [rng.integers(0, space.n, size=n).astype(np.int32) for _ in range(count)]
    return [rng.uniform(space.low, space.high, size=(n, *space.shape)).astype(np.float32) for _ in range(count)]


def send_recv(env: Any, space: gym.Space, s: Setup, batch: int, ids: bool = True) -> Stepper:
    """The loop every pool shares: recv a batch of results, send those envs their next actions.

    Sync (batch == N): actions for all envs in env-id order, no ids, as step() does. Async: the
    env ids of the batch just received. `ids=False` for ale-py's AtariVectorEnv: its send() never
    takes ids (it answers the envs of the last recv) and its reset() returns the first batch; it
    is left unseeded, as a seeded reset reloads every env (~0.25 s each, stalling the first recvs).
    """
    acts = draw_actions(space, batch, s.seed)
    if ids:
        env.async_reset()
        env_ids = env.recv()[-1]["env_id"]
    else:
        env_ids = env.reset()[-1]["env_id"]
    send_ids = ids and batch < s.num_envs
    i = 0

    def advance() -> int:
        nonlocal i, env_ids
        env.send(acts[i % len(acts)], env_ids) if send_ids else env.send(acts[i % len(acts)])
        env_ids = env.recv()[-1]["env_id"]
        i += 1
        return batch

    return Stepper(advance, env.close, s.num_envs, batch, s.threads)


def make_rlfast(s: Setup, sync: bool, work_in_recv: bool = False) -> Stepper:
    """rlfast's pool on s.threads stepping threads; under work_in_recv the calling thread is one of them."""
    b = s.num_envs if sync else s.batch_size
    workers = s.threads - 1 if work_in_recv else s.threads
    pool = rlfast.make(s.task, num_envs=s.num_envs, batch_size=b, num_threads=workers, seed=s.seed,
                       work_in_recv=work_in_recv)  # fmt: skip
    return send_recv(pool, pool.single_action_space, s, b)


def make_envpool(s: Setup, sync: bool) -> Stepper:
    import envpool  # optional peer

    if s.task not in envpool.list_all_envs():
        raise LookupError(f"envpool has no {s.task}")
    b = s.num_envs if sync else s.batch_size
    env = envpool.make(s.task, env_type="gymnasium", num_envs=s.num_envs, batch_size=b, num_threads=s.threads,
                       seed=s.seed)  # fmt: skip
    return send_recv(env, env.action_space, s, b)


def ale_game(task: str) -> str:
    """ROM id of an rlfast Atari task ("MontezumaRevenge-v5" -> "montezuma_revenge"), or LookupError."""
    import ale_py  # optional peer

    games = {"".join(p.capitalize() for p in g.split("_")) + "-v5": g for g in ale_py.roms.get_all_rom_ids()}
    if task not in games:
        raise LookupError(f"ale-py has no ROM for {task}")
    return games[task]


def make_ale(s: Setup, sync: bool) -> Stepper:
    from ale_py.vector_env import AtariVectorEnv  # optional peer

    b = s.num_envs if sync else s.batch_size
    env = AtariVectorEnv(ale_game(s.task), s.num_envs, batch_size=b, num_threads=s.threads, reward_clipping=False)
    return send_recv(env, env.single_action_space, s, b, ids=False)


def gym_env(task: str, family: str) -> gym.Env:
    """One gymnasium env; Atari: ale-py's env with rlfast's default preprocessing (84x84 gray, skip 4, stack 4)."""
    if family != "atari":
        return gym.make(task)
    import ale_py  # optional peer

    gym.register_envs(ale_py)
    env = gym.make(f"ALE/{task}", frameskip=1, repeat_action_probability=0.0)
    env = gym.wrappers.AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84, grayscale_obs=True)
    return gym.wrappers.FrameStackObservation(env, 4)


def make_gym(s: Setup, in_subprocesses: bool) -> Stepper:
    fns = [partial(gym_env, s.task, s.family)] * s.num_envs
    env = gym.vector.AsyncVectorEnv(fns) if in_subprocesses else gym.vector.SyncVectorEnv(fns)
    env.reset(seed=s.seed)
    acts = draw_actions(env.single_action_space, s.num_envs, s.seed)
    i = 0

    def advance() -> int:
        nonlocal i
        env.step(acts[i % len(acts)])
        i += 1
        return s.num_envs

    return Stepper(advance, env.close, s.num_envs, s.num_envs, s.num_envs if in_subprocesses else 1)


def make_raw_ale(s: Setup) -> Stepper:
    """ALE's emulator alone, 25 env steps of frame_skip act() calls per call: no screen, no preprocessing."""
    import ale_py  # optional peer

    ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)  # no banner per process
    ale = ale_py.ALEInterface()
    ale.setInt("random_seed", s.seed)
    ale.setFloat("repeat_action_probability", 0.0)
    ale.loadROM(ale_py.roms.get_rom_path(ale_game(s.task)))
    actions = ale.getMinimalActionSet()
    picks = [actions[k] for k in np.random.default_rng(s.seed).integers(0, len(actions), size=1000)]
    i = 0

    def advance() -> int:
        nonlocal i
        for _ in range(25):
            for _ in range(s.frame_skip):
                ale.act(picks[i % 1000])
            if ale.game_over():
                ale.reset_game()
            i += 1
        return 25

    return Stepper(advance, lambda: None, 1, 1, 1)


def mj_step_helper() -> str:
    """benchmarks/bench_mj_step.cc compiled against the installed mujoco wheel (cached in the temp dir).

    Locates the wheel without importing `mujoco`: see run_in_child for why this process must not.
    """
    spec = importlib.util.find_spec("mujoco")
    if spec is None or spec.origin is None:
        raise LookupError("the mujoco package is not installed")
    pkg = os.path.dirname(spec.origin)
    src = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bench_mj_step.cc")
    exe = os.path.join(tempfile.gettempdir(), f"rlfast_bench_mj_step_{importlib.metadata.version('mujoco')}")
    if not os.path.exists(exe) or os.path.getmtime(exe) < os.path.getmtime(src):
        libs = glob.glob(os.path.join(pkg, "libmujoco.so.*"))
        tmp = f"{exe}.{os.getpid()}"  # then renamed: concurrent runs never see half a binary
        cmd = [os.environ.get("CXX", "g++"), "-O2", "-std=c++17", "-pthread", f"-I{pkg}/include", src, *libs[:1],
               f"-Wl,-rpath,{pkg}", "-o", tmp]  # fmt: skip
        try:
            subprocess.run(cmd, check=True, capture_output=True, text=True)
        except (OSError, subprocess.CalledProcessError) as e:
            raise LookupError(f"cannot build {src}: {getattr(e, 'stderr', None) or e}") from e
        os.replace(tmp, exe)
    return exe


def run_raw(s: Setup, procs: int) -> tuple[int, float]:
    """(env steps, seconds) of the engine alone on `procs` cores at once. Atari: make_raw_ale in
    one process per core. MuJoCo: benchmarks/bench_mj_step.cc, one thread per core (each with its
    own mjData), resetting on gymnasium's healthy_z_range like an RL rollout."""
    if s.family == "atari":
        return measure_in_processes(s, procs)
    defaults = _C.task_defaults(s.task)
    xml = _mujoco.resolve_xml_file(defaults, {})["xml_file"]  # the file gymnasium and rlfast load
    z = defaults.get("healthy_z_range", ()) if defaults.get("terminate_when_unhealthy") else ()
    cmd = [mj_step_helper(), xml, str(s.frame_skip), str(procs), str(s.seconds), *map(str, z)]
    steps, seconds = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout.split()
    return int(steps), float(seconds)


@dataclass(frozen=True)
class Contender:
    families: tuple[str, ...]
    make: Optional[Callable[[Setup], Stepper]] = None
    """a Stepper, timed by `measure` in a forked child process (run_in_child)"""
    cores: Optional[Callable[[Setup], int]] = None
    """or: the raw engine alone (run_raw) on this many cores at once"""


ALL = tuple(FAMILIES)
N1 = {"num_envs": 1, "batch_size": 1, "threads": 1}
CONTENDERS: dict[str, Contender] = {
    "raw-1core": Contender(("atari", "mujoco"), cores=lambda s: 1),
    "raw-limit": Contender(("atari", "mujoco"), cores=lambda s: s.cores),
    "rlfast-sync": Contender(ALL, partial(make_rlfast, sync=True)),
    "rlfast-async": Contender(ALL, partial(make_rlfast, sync=False)),
    "rlfast-async-wir": Contender(ALL, partial(make_rlfast, sync=False, work_in_recv=True)),
    "envpool-sync": Contender(ALL, partial(make_envpool, sync=True)),
    "envpool-async": Contender(ALL, partial(make_envpool, sync=False)),
    "ale-sync": Contender(("atari",), partial(make_ale, sync=True)),
    "ale-async": Contender(("atari",), partial(make_ale, sync=False)),
    "gym-sync": Contender(("classic_control", "mujoco"), partial(make_gym, in_subprocesses=False)),
    "gym-async": Contender(ALL, partial(make_gym, in_subprocesses=True)),
    "rlfast-n1": Contender(("atari",), lambda s: make_rlfast(replace(s, **N1), sync=True)),
    "envpool-n1": Contender(("atari",), lambda s: make_envpool(replace(s, **N1), sync=True)),
    "rlfast-n1-wir": Contender(("atari",), lambda s: make_rlfast(replace(s, **N1), sync=True, work_in_recv=True)),
}
SWEEP = ("raw-limit", "rlfast-async", "rlfast-async-wir", "envpool-async")
SKIPPABLE = (ImportError, LookupError, gym.error.Error)


def measure(stepper: Stepper, warmup: float, seconds: float) -> tuple[int, float]:
    """Runs `warmup` seconds unmeasured, then counts env steps over `seconds` of wall clock."""
    end = time.perf_counter() + warmup
    while time.perf_counter() < end:
        stepper.advance()
    steps, start = 0, time.perf_counter()
    end = start + seconds
    while True:
        steps += stepper.advance()
        now = time.perf_counter()
        if now >= end:
            return steps, now - start


def measure_in_worker(s: Setup, start: Any, out: Any) -> None:
    """Worker process: builds the raw ALE stepper, waits until every worker is ready, measures."""
    # Any error goes to the parent, which raises it (or notes a skip) like an in-process one.
    try:
        stepper = make_raw_ale(s)
    except Exception as e:  # noqa: BLE001
        start.abort()  # the others' wait() raises instead of waiting for this one
        out.put(e)
        return
    try:
        start.wait()
        out.put(measure(stepper, s.warmup, s.seconds))
    except Exception as e:  # noqa: BLE001
        out.put(e)
    finally:
        stepper.close()


def measure_in_processes(s: Setup, procs: int) -> tuple[int, float]:
    """`procs` worker processes measuring at once; their rates summed.

    Forked: a worker starts in ~0.1 s (a spawned one re-imports torch, ~1.5 s). It only runs ALE,
    so neither the pools' threads (closed by now) nor torch's thread pool matter there.
    """
    ctx = mp.get_context("fork")
    start, out = ctx.Barrier(procs, timeout=60), ctx.Queue()
    args = [(replace(s, seed=s.seed + k), start, out) for k in range(procs)]
    workers = [ctx.Process(target=measure_in_worker, args=a, daemon=True) for a in args]
    for w in workers:
        w.start()
    got = [out.get(timeout=s.warmup + s.seconds + 120) for _ in workers]  # queue.Empty: a worker died
    for w in workers:
        w.join()
    errors = [e for e in got if isinstance(e, Exception)]
    if errors:  # the first real error, not the BrokenBarrierError it caused in the others
        raise next((e for e in errors if isinstance(e, SKIPPABLE)), errors[0])
    steps = sum(n for n, _ in got)
    return steps, steps / sum(n / secs for n, secs in got)


def measure_contender(contender: Contender, s: Setup) -> tuple[int, float, int, int, int]:
    """(steps, seconds, envs, batch, threads) of one timed run of `contender`."""
    assert contender.make is not None
    if s.import_mujoco:
        import mujoco  # noqa: F401 - its side effect on libmujoco is what --import-mujoco measures
    stepper = contender.make(s)
    try:
        steps, secs = measure(stepper, s.warmup, s.seconds)
    finally:
        stepper.close()
    return steps, secs, stepper.num_envs, stepper.batch, stepper.threads


def run_in_child(fn: Callable[[], Any], timeout: float) -> Any:
    """fn() in a forked child process; its result, or its exception raised here.

    Each contender runs in a process no other contender has changed. This mattered: importing the
    `mujoco` Python package (gym-sync does, through gymnasium) installs a profiling timer in the
    libmujoco rlfast shares (mjcb_time), which made rlfast's MuJoCo steps in the same process ~8%
    slower, so an in-process benchmark ranked contenders by the order they ran in. rlfast's
    workers now switch that timer off (envs/mujoco/model.h, DropBindingsTimer), and
    `--import-mujoco` shows it; the parent still never imports `mujoco`.
    """
    ctx = mp.get_context("fork")
    out = ctx.Queue()

    def target() -> None:
        try:
            out.put(fn())
        except Exception as e:  # noqa: BLE001 - re-raised in the parent
            out.put(e)

    child = ctx.Process(target=target)  # not a daemon: gym-async starts processes of its own
    child.start()
    deadline = time.monotonic() + timeout
    try:
        while True:
            try:
                got = out.get(timeout=1.0)
                break
            except queue.Empty:
                if not child.is_alive() and out.empty():  # died without a result (a crash): say so at once
                    raise ChildDied(f"failed: the contender's process exited with {child.exitcode}") from None
                if time.monotonic() > deadline:
                    raise ChildDied(f"failed: no result within {timeout:.0f} s") from None
    finally:
        child.join(timeout=60)
    if isinstance(got, Exception):
        raise got
    return got


class ChildDied(RuntimeError):
    """A contender's process crashed or hung: its row says so and the benchmark goes on."""


def run_one(name: str, s: Setup) -> Result:
    contender = CONTENDERS[name]
    try:
        if contender.cores is not None:
            cores = contender.cores(s)
            steps, secs = run_raw(s, cores)
            return Result(s.task, name, cores, 1, cores, steps, secs, s.scale)
        steps, secs, n, b, t = run_in_child(partial(measure_contender, contender, s), s.warmup + s.seconds + 300)
    except SKIPPABLE as e:
        return Result(s.task, name, s.num_envs, 0, 0, 0, 0.0, s.scale, note=f"skipped: {e}")
    except ChildDied as e:
        return Result(s.task, name, s.num_envs, 0, 0, 0, 0.0, s.scale, note=str(e))
    return Result(s.task, name, n, b, t, steps, secs, s.scale)


def run_rounds(names: list[str], s: Setup, rounds: int) -> dict[str, Result]:
    """Every contender `rounds` times, interleaved; keeps each one's best run."""
    best: dict[str, Result] = {}
    for _ in range(rounds):
        for name in names:
            r = run_one(name, s)
            if name not in best or r.rate > best[name].rate:
                best[name] = r
    return best


def ratio(results: dict[str, Result], a: str, b: str) -> Optional[float]:
    ra, rb = results.get(a), results.get(b)
    if ra is None or rb is None or ra.steps == 0 or rb.steps == 0:
        return None
    return ra.rate / rb.rate


PAIRS = [
    ("rlfast-sync", "envpool-sync"),
    ("rlfast-async", "envpool-async"),
    ("rlfast-async-wir", "envpool-async"),
    ("rlfast-n1", "envpool-n1"),
    ("rlfast-n1-wir", "envpool-n1"),
    ("rlfast-sync", "ale-sync"),
    ("rlfast-async", "ale-async"),
    ("rlfast-sync", "gym-sync"),
    ("rlfast-async", "gym-async"),
]


def format_table(s: Setup, results: dict[str, Result], rounds: int) -> str:
    fam = FAMILIES[s.family]
    limit = results["raw-limit"].rate if results.get("raw-limit") and results["raw-limit"].steps else None
    base = next((b for b in ("gym-sync", "gym-async") if results.get(b) and results[b].steps), None)
    title = (
        f"{s.task}: {fam.explained.format(skip=s.frame_skip)}; N={s.num_envs}, B={s.batch_size}, threads={s.threads}"
    )
    header = f"{'contender':<18}{'envs':>6}{'batch':>6}{'threads':>8}{fam.unit:>14}"
    header += (f"{'of limit':>10}" if limit else "") + (f"{'vs ' + base:>14}" if base else "")
    lines = [f"\n{title}, {CORES} cores, best of {rounds} x {s.seconds:g} s", header]
    for name, r in results.items():
        if not r.steps:
            lines.append(f"{name:<18}  {r.note}")
            continue
        row = f"{name:<18}{r.num_envs:>6}{r.batch_size:>6}{r.threads:>8}{r.rate:>14,.0f}"
        row += f"{r.rate / limit:>10.0%}" if limit else ""
        row += f"{ratio(results, name, base):>13.1f}x" if base else ""
        lines.append(row)
    for ours in ("rlfast-async", "rlfast-async-wir"):
        x = ratio(results, ours, "raw-limit")
        if x is not None:
            lines.append(f"  {ours}: {x:.0%} of the limit (raw-limit on {results['raw-limit'].threads} cores)")
    for ours, peer in PAIRS:
        x = ratio(results, ours, peer)
        if x is not None:
            lines.append(f"  {ours} / {peer}: {x:.2f}x")
    return "\n".join(lines)


STARTUP = ("rlfast", "envpool", "ale-vector")


def time_startup(name: str, task: str, n: int, threads: Optional[int], seed: int) -> tuple[float, float]:
    """(seconds to make n envs, seconds for their first reset) of one contender."""
    start = time.perf_counter()
    if name == "rlfast":
        env: Any = rlfast.make(task, n, num_threads=threads, seed=seed)
    elif name == "envpool":
        import envpool  # optional peer

        if task not in envpool.list_all_envs():
            raise LookupError(f"envpool has no {task}")
        env = envpool.make_gymnasium(task, num_envs=n, seed=seed, **({"num_threads": threads} if threads else {}))
    else:
        from ale_py.vector_env import AtariVectorEnv  # optional peer

        if rlfast.task_family(task) != "atari":
            raise LookupError("ale-py's vector env is Atari only")
        env = AtariVectorEnv(ale_game(task), n, **({"num_threads": threads} if threads else {}))
    made = time.perf_counter()
    env.reset()  # seeded at make (EnvPool ignores reset seeds)
    reset = time.perf_counter()
    env.close()
    return made - start, reset - made


def startup_table(task: str, args: Args) -> tuple[str, dict[str, tuple[float, float]]]:
    """Best (make, reset) seconds of each contender over args.rounds, interleaved, and their table."""
    n = args.startup
    best: dict[str, tuple[float, float]] = {}
    notes: dict[str, str] = {}
    for _ in range(args.rounds):
        for name in STARTUP:
            try:
                got = run_in_child(partial(time_startup, name, task, n, args.num_threads, args.seed), 3600)
            except SKIPPABLE as e:
                notes[name] = f"skipped: {e}"
                continue
            if name not in best or got[0] < best[name][0]:
                best[name] = got
    lines = [
        f"\n{task}: start-up of {n} envs ({args.num_threads or 'default'} threads), {CORES} cores, "
        f"best of {args.rounds}",
        f"{'contender':<14}{'make s':>10}{'ms/env':>10}{'reset s':>10}{'make vs rlfast':>16}",
    ]
    for name in STARTUP:
        if name not in best:
            lines.append(f"{name:<14}  {notes.get(name, '')}")
            continue
        made, reset = best[name]
        lines.append(f"{name:<14}{made:>10.2f}{made / n * 1000:>10.1f}{reset:>10.2f}"
                     f"{made / best['rlfast'][0] if 'rlfast' in best else float('nan'):>15.2f}x")
    return "\n".join(lines), best


def sweep_threads(task: str, names: list[str], args: Args) -> dict[str, list[tuple[int, float]]]:
    """(threads, rate) of each of `names` (SWEEP) per thread count."""
    curves: dict[str, list[tuple[int, float]]] = {}
    for t in args.threads_sweep or range(1, CORES + 1):
        s = make_setup(task, args, threads=t)
        for name, r in run_rounds(names, s, args.rounds).items():
            if r.steps:
                curves.setdefault(name, []).append((t, r.rate))
        print(f"{task}: threads={t} " + ", ".join(f"{n} {v[-1][1]:,.0f}" for n, v in curves.items()), flush=True)
    return curves


def write_plot(path: str, sweeps: dict[str, dict[str, list[tuple[int, float]]]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(sweeps), figsize=(5 * len(sweeps), 4), squeeze=False)
    for ax, (task, curves) in zip(axes[0], sweeps.items()):
        for name, points in curves.items():
            ax.plot(*zip(*points), marker="o", label=name)
            ax.set_xticks([t for t, _ in points])
        family = _C.task_family(task)
        ax.set(title=f"{task} ({CORES} cores)", xlabel="threads (raw-limit: cores)", ylabel=FAMILIES[family].unit)
        ax.set_ylim(bottom=0)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(args: Args) -> dict[str, dict[str, Result]]:
    unknown = [c for c in args.contenders or () if c not in CONTENDERS]
    if unknown:
        raise SystemExit(f"unknown contender(s) {unknown}; choose from {list(CONTENDERS)}")
    for task in args.tasks:
        check_task_id(task)
    if args.plot and importlib.util.find_spec("matplotlib") is None:  # fail before minutes of measuring
        raise SystemExit("error: --plot needs matplotlib: pip install matplotlib (or pip install -e '.[bench]')")
    everything: dict[str, dict[str, Result]] = {}
    sweeps: dict[str, dict[str, list[tuple[int, float]]]] = {}
    startups: dict[str, dict[str, tuple[float, float]]] = {}
    for task in args.tasks:
        if args.startup:
            table, startups[task] = startup_table(task, args)
            print(table, flush=True)
        s = make_setup(task, args)
        chosen = CONTENDERS if args.contenders is None else args.contenders  # () with --startup: start-up only
        names = [c for c in chosen if s.family in CONTENDERS[c].families]
        everything[task] = run_rounds(names, s, args.rounds)
        if names:
            print(format_table(s, everything[task], args.rounds), flush=True)
        if args.plot:
            sweeps[task] = sweep_threads(task, [c for c in SWEEP if c in names], args)
    if args.plot:
        write_plot(args.plot, sweeps)
        print(f"wrote {args.plot}")
    if args.json:
        payload = {
            "args": asdict(args),
            "cpu_count": CORES,
            "results": {
                t: {n: {**asdict(r), "steps_per_s": r.steps_per_s, "rate": r.rate} for n, r in rs.items()}
                for t, rs in everything.items()
            },
            "sweep": sweeps,
            "startup": {t: {n: {"make_s": m, "reset_s": r} for n, (m, r) in rs.items()} for t, rs in startups.items()},
        }
        with open(args.json, "w") as f:
            json.dump(payload, f, indent=2)
    return everything


if __name__ == "__main__":
    # EnvPool's first space conversion warns about float64 bounds cast to float32; harmless here.
    warnings.filterwarnings("ignore", message=".*precision lowered by casting to float32.*")
    main(tyro.cli(Args))
