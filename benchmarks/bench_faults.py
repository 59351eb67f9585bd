"""Fault injection for the trainers: killed at random moments, fed broken checkpoints, a full disk, Ctrl-C at bad
moments. Each injection is checked against what rlfast promises, and the table says how each went.

    python benchmarks/bench_faults.py                       # every fault, 5 injections each
    python benchmarks/bench_faults.py --repeats 1 --faults sigkill truncated   # some of them, once

The trainer is ``ppo.py`` on CartPole-v1 (4 envs x 128 steps an iteration, ~0.5 s on 2 cores), each run its own
process in a fresh folder. What each fault checks (a row passes when every injection did):

- ``sigkill``: SIGKILL at a random moment 0.5-8 s after the run's first checkpoint, with ``--save-minutes 0.02``
  (1.2 s); then
  ``--resume`` to the end. The checkpoint, the event files and the run dir stay readable, the resumed run starts
  from the checkpoint's step, and the work lost (kill time - the checkpoint's write time) is at most
  ``--save-minutes`` plus one iteration. ``sigkill_dqn_replay``: the same for dqn.py with ``--save-replay``,
  whose replay buffer must come back with the checkpoint.
- ``truncated``, ``corrupt``, ``other_script``, ``other_env``, ``bad_flag``: ``--resume`` from a checkpoint cut
  at a random length, with random bytes overwritten, written by dqn.py, resumed with another ``--env-id``, or
  whose saved flags hold a value of the wrong type: one ``error:`` line naming the file, no traceback.
- ``disk_full``: the next checkpoint does not fit (a file size limit, RLIMIT_FSIZE; and a 96 KB tmpfs where
  this process may mount one): one ``error:`` line naming the path, the previous checkpoint byte for byte intact.
- ``ctrl_c_make``, ``ctrl_c_compile``, ``ctrl_c_save``: SIGINT while the envs are being built (a gymnasium env
  that takes 20 s to build), during the first ``--compile``, or while ``checkpoint.pt`` is being written: the
  process ends within 10 s with status 130 and no traceback, no worker process is left, and the run dir's
  checkpoint (if any) loads.

Data lost is the training time a fault cost beyond what the process had saved (0 where nothing was running).
"""

import hashlib
import os
import random
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence

import torch
import tyro

from rlfast.algos.checkpoint import checksum, save_checkpoint

ROOT = Path(__file__).resolve().parents[1]
BASE = ["--env-id", "CartPole-v1", "--num-envs", "4", "--num-steps", "128", "--torch-threads", "1"]
DQN = ["--env-id", "CartPole-v1", "--num-envs", "4", "--learning-starts", "1000", "--torch-threads", "1",
       "--save-replay"]  # fmt: skip
SLOW_ENV = ("import gymnasium as gym, time\n"
            "class SlowBuild(gym.Wrapper):\n"
            "    def __init__(self):\n"
            "        time.sleep(20)\n"
            "        super().__init__(gym.make('CartPole-v1'))\n"
            "gym.register('SlowBuild-v0', entry_point=SlowBuild)\n")  # fmt: skip
"""a user's module whose env takes 20 s to build (``slowbuild:SlowBuild-v0``)"""


@dataclass
class Args:
    faults: tuple[str, ...] = ()
    """the faults to inject (default: all)"""
    repeats: int = 5
    """injections per fault"""
    seed: int = 0
    """seed of the random moments and bytes"""


@dataclass
class Outcome:
    ok: bool
    what: str
    lost_s: float = 0.0


def trainer(folder: Path, *flags: str, env: Optional[dict] = None, preexec: Optional[Callable] = None,
            script: str = "ppo.py", **popen) -> subprocess.Popen:  # fmt: skip
    """ppo.py (or ``script``, with DQN's flags) in ``folder`` (its runs go to ``folder/runs``), its output piped.
    Python's faulthandler is on: a trainer that dies of a signal (an abort, a segfault) prints every thread's stack."""
    base = BASE if script == "ppo.py" else DQN
    return subprocess.Popen([sys.executable, str(ROOT / "scripts" / script), *base, "--runs-dir", str(folder / "runs"),
                             *flags],  # fmt: skip
                            cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONFAULTHANDLER": "1", **(env or {})}, preexec_fn=preexec,
                            **popen)  # fmt: skip


def finished(proc: subprocess.Popen, timeout: float = 600) -> tuple[int, str]:
    out, _ = proc.communicate(timeout=timeout)
    return proc.returncode, out


def run_dir(folder: Path) -> Path:
    dirs = sorted((folder / "runs").glob("*"))
    if len(dirs) != 1:
        raise RuntimeError(f"expected one run dir in {folder / 'runs'}, found {dirs}")
    return dirs[0]


_references: dict[int, Path] = {}
"""steps -> a finished ppo.py run of that many steps, made once per process (``a_run``)"""
_keep: list[tempfile.TemporaryDirectory] = []  # their folder, made on first use, removed when this process ends


def a_run(folder: Path, steps: int = 2048) -> Path:
    """A finished ppo.py run of ``steps`` steps in ``folder``; its run dir. The run is made once per process and
    copied into each folder that asks (the flags and seed are always the same): a fault spoils only its copy."""
    if steps not in _references:
        if not _keep:
            _keep.append(tempfile.TemporaryDirectory(prefix="fault_reference_"))
        made = Path(_keep[0].name) / str(steps)
        made.mkdir()
        code, out = finished(trainer(made, "--total-timesteps", str(steps)))
        if code != 0:
            raise RuntimeError(f"the reference run failed ({code}):\n{out}")
        _references[steps] = run_dir(made)
    source = _references[steps]
    shutil.copytree(source, folder / "runs" / source.name)
    return run_dir(folder)


def one_error_line(code: int, out: str, must: Sequence[str]) -> Outcome:
    """A refusal: non-zero status, an ``error:`` line with each of ``must``, no traceback."""
    lines = [line for line in out.splitlines() if line.startswith("error:")]
    ok = code not in (0, None) and "Traceback" not in out and len(lines) == 1 and all(m in lines[0] for m in must)
    return Outcome(ok, lines[0] if lines else f"status {code}: {out.strip().splitlines()[-1:]}")


def readable(run: Path) -> Optional[str]:
    """None if the run dir's checkpoint loads and its event files parse, else what is wrong."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from rlfast.algos.checkpoint import load_checkpoint

    try:
        load_checkpoint(run)
        for events in run.glob("events.out.tfevents.*"):
            EventAccumulator(str(events)).Reload()
    except Exception as e:  # noqa: BLE001  (whatever it is, it is the finding)
        return f"{type(e).__name__}: {e}"
    leftovers = [p.name for p in run.glob(".*.tmp")]
    return f"temporary files left: {leftovers}" if leftovers else None


def sigkill(folder: Path, rng: random.Random, script: str = "ppo.py") -> Outcome:
    save_minutes, total = 0.02, 2_000_000
    proc = trainer(folder, "--total-timesteps", str(total), "--save-minutes", str(save_minutes), script=script)
    deadline = time.monotonic() + 120  # the moment counts from the first checkpoint (start-up varies with load)
    while not list((folder / "runs").glob("*/checkpoint.pt")) and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    delay = rng.uniform(0.5, 8)
    time.sleep(delay)
    proc.kill()
    killed_at = time.time()
    finished(proc)
    run = run_dir(folder)
    ckpt_file = run / "checkpoint.pt"
    if not ckpt_file.exists():
        return Outcome(False, f"no checkpoint {delay:.1f} s after the first one")
    lost = killed_at - ckpt_file.stat().st_mtime
    if (problem := readable(run)) is not None:
        return Outcome(False, problem, lost)
    step = torch.load(ckpt_file, weights_only=True)["global_step"]
    more = 2048 if script == "ppo.py" else 400  # whole iterations (4 envs x 128 steps, 4 envs x 100)
    code, out = finished(trainer(folder, "--resume", str(run), "--total-timesteps", str(step + more), script=script))
    iteration = 0.6 * 4  # an iteration's time at most (~0.5 s here), with room for a loaded machine
    resumed = code == 0 and re.search(rf"step\s+{step + more:,}/{step + more:,}", out) is not None
    if script != "ppo.py":  # its replay buffer comes back too (saved before each checkpoint.pt, same step or later)
        resumed = resumed and f"replay buffer: restored from {run / 'replay_buffer.pt'}" in out
    ok = resumed and lost <= 60 * save_minutes + iteration and (problem := readable(run)) is None
    what = f"killed {delay:.1f} s after the first checkpoint; resumed from step {step:,}"
    what += "" if resumed else f" FAILED: {out[-400:]}"
    return Outcome(ok, what + (f"; {problem}" if problem else ""), lost)


def broken_checkpoint(kind: str) -> Callable[[Path, random.Random], Outcome]:
    def inject(folder: Path, rng: random.Random) -> Outcome:
        run = a_run(folder)
        source = run / "checkpoint.pt"
        bad = folder / f"{kind}.pt"
        data = bytearray(source.read_bytes())
        flags: list[str] = []
        must = [bad.name]
        if kind == "truncated":
            bad.write_bytes(data[: rng.randrange(1, len(data))])
            must.append("truncated, corrupt")
        elif kind == "corrupt":
            for _ in range(64):
                data[rng.randrange(len(data))] = rng.randrange(256)
            bad.write_bytes(data)
            must = [bad.name]  # a flipped byte may land in a tensor's values: then the file loads and fits
        elif kind in ("other_script", "bad_flag"):
            ckpt = torch.load(source, weights_only=True)
            if kind == "other_script":
                ckpt["script"] = "dqn.py"
                must.append("written by dqn.py, not ppo.py")
            else:
                ckpt["args"]["num_envs"] = rng.choice(["many", 2.5, [4]])
                must.append("num_envs = ")
            save_checkpoint(bad, ckpt)  # a whole file (its checksum made anew) that another script wrote, or whose
            # saved flags this version cannot take
        else:  # other_env
            shutil.copy(source, bad)
            flags = ["--env-id", "Acrobot-v1"]
            must.append("trained on CartPole-v1")
        code, out = finished(trainer(folder, "--resume", str(bad), "--total-timesteps", "4096", *flags))
        if kind == "corrupt" and code == 0:  # fine only if no byte that is read changed (zip padding, say)
            same = checksum(torch.load(bad, weights_only=True)) == checksum(torch.load(source, weights_only=True))
            what = "it loaded: " + ("the bytes changed were not read" if same else "CHANGED DATA READ")
            return Outcome(same and "Traceback" not in out, what)
        return one_error_line(code, out, must)

    return inject


def disk_full(folder: Path, rng: random.Random) -> Outcome:
    run = a_run(folder)
    ckpt_file = run / "checkpoint.pt"
    before = hashlib.sha256(ckpt_file.read_bytes()).hexdigest()
    limit = rng.randrange(1, ckpt_file.stat().st_size)

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    # The resumed run makes its event file first (well under the limit), then its first checkpoint.
    proc = trainer(folder, "--resume", str(run), "--total-timesteps", "8192", "--save-minutes", "0.001",
                   preexec=small_files)  # fmt: skip
    code, out = finished(proc)
    outcome = one_error_line(code, out, ["could not write", str(ckpt_file.relative_to(folder)), "is intact"])
    intact = hashlib.sha256(ckpt_file.read_bytes()).hexdigest() == before and readable(run) is None
    return Outcome(outcome.ok and intact, f"size limit {limit:,} B: {outcome.what}" + ("" if intact else "; CHANGED"))


def disk_full_tmpfs(folder: Path, rng: random.Random) -> Outcome:
    """The same on a real full file system: a 96 KB tmpfs (the checkpoint is ~140 KB), where mount works."""
    mount = folder / "small"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=96k", "tmpfs", str(mount)], capture_output=True).returncode:
        return Outcome(True, "skipped: this process may not mount a tmpfs")
    try:
        proc = trainer(mount, "--total-timesteps", "8192", "--save-minutes", "0.001")
        code, out = finished(proc)
        return one_error_line(code, out, ["could not write", "No space left on device"])
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def ctrl_c(when: str) -> Callable[[Path, random.Random], Outcome]:
    def inject(folder: Path, rng: random.Random) -> Outcome:
        flags, env = ["--total-timesteps", "200000", "--save-minutes", "0.01"], {}
        if when == "make":
            (folder / "slowbuild.py").write_text(SLOW_ENV)
            flags += ["--env-id", "slowbuild:SlowBuild-v0"]
            env = {"PYTHONPATH": str(folder)}
        if when == "compile":
            flags += ["--compile"]
        # Ctrl-C reaches the whole foreground group: the trainer and its env workers (a new session here).
        proc = trainer(folder, *flags, env=env, start_new_session=True,
                       preexec=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
        start = time.monotonic()
        moment = watch(folder, proc, when, rng)
        if moment is None:
            proc.kill()
            return Outcome(False, f"never reached the moment ({when}): {finished(proc)[1][-300:]}")
        os.killpg(proc.pid, signal.SIGINT)
        stopped = time.monotonic()
        try:
            code, out = finished(proc, timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            return Outcome(False, "still running 30 s after Ctrl-C")
        took = time.monotonic() - stopped
        left = leftovers(proc.pid)
        runs = list((folder / "runs").glob("*"))
        problem = readable(runs[0]) if runs and (runs[0] / "checkpoint.pt").exists() else None
        ok = code == 130 and "Traceback" not in out and took < 10 and not left and problem is None
        what = f"at {moment - start:.1f} s: status {code}, stopped in {took:.1f} s"
        what += (f"; {problem}" if problem else "") + (f"; processes left: {left}" if left else "")
        if not ok:  # what the trainer printed last says why (a Python traceback, an abort's message and stacks)
            what += f"; its output ends: {out[-1500:]!r}"
        return Outcome(ok, what)

    return inject


def leftovers(session: int, wait: float = 3.0) -> list[str]:
    """The processes still in ``session`` after up to ``wait`` seconds (helpers such as multiprocessing's resource
    tracker leave on their own once the trainer has gone)."""
    deadline = time.monotonic() + wait
    while True:
        left = subprocess.run(["pgrep", "-s", str(session)], capture_output=True, text=True).stdout.split()
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def watch(folder: Path, proc: subprocess.Popen, when: str, rng: random.Random) -> Optional[float]:
    """Waits for the moment to interrupt ``proc``; its time (monotonic) or None if the process ended first."""
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        if when == "make":  # the env workers (the trainer's children) exist, their envs are not built yet
            if subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True).returncode == 0:
                time.sleep(rng.uniform(0.5, 3))
                return time.monotonic()
        elif when == "compile":  # the run dir exists: the first iteration (the compile) is under way
            if list((folder / "runs").glob("*/events.out.tfevents.*")):
                time.sleep(rng.uniform(0.0, 1.0))
                return time.monotonic()
        elif list((folder / "runs").glob("*/.checkpoint.pt.*.tmp")):  # a checkpoint being written
            return time.monotonic()
        time.sleep(0.0005)
    return None


def worker(kind: str) -> Callable[[Path, random.Random], Outcome]:
    """A pool of 16 gymnasium CartPole-v1 envs in 2 worker processes, async batches of 4 (``step_timeout`` 2 s):
    after a random number of rounds a worker is SIGKILLed, SIGSEGVed or SIGSTOPped (hung). One EnvError must come,
    naming that worker's pid, within 10 s; then every env must give results again within 10 s."""

    def inject(folder: Path, rng: random.Random) -> Outcome:
        import numpy as np

        import rlfast

        sig = {"sigkill": signal.SIGKILL, "sigsegv": signal.SIGSEGV, "hang": signal.SIGSTOP}[kind]
        errors, lost, seen = [], 0, np.zeros(16, int)

        def one_round(pool, count: bool) -> None:
            nonlocal lost
            try:
                *_, info = pool.recv()
                ids = info["env_id"].numpy().copy()
                seen[ids] += count
            except rlfast.EnvError as err:
                errors.append((str(err), time.monotonic() - start))
                ids = err.env_ids.numpy().copy()
                lost += len(ids)
            if len(ids):
                pool.send(np.zeros(len(ids), np.int64), ids)

        def cartpole():  # gymnasium's CartPole-v1, in a worker without the faulthandler it inherits from pytest
            import faulthandler  # (the SIGSEGVed worker would print a traceback dump into the output: expected,
            import gymnasium     # but alarming)

            faulthandler.disable()
            return gymnasium.make("CartPole-v1")

        with rlfast.make_from(cartpole, 16, batch_size=4, num_workers=2, step_timeout=2.0) as pool:
            pool.async_reset()
            rounds = rng.randrange(50, 2000)
            for _ in range(rounds):
                one_round(pool, False)
            victim = pool._procs[rng.randrange(2)][0].pid
            os.kill(victim, sig)
            start = time.monotonic()
            while not errors and time.monotonic() - start < 10:
                one_round(pool, False)
            after = time.monotonic()  # then every env must give results again (the new worker starts in ~0.1 s)
            while not (seen > 0).all() and time.monotonic() - after < 10:
                one_round(pool, True)
        ok = len(errors) == 1 and f"(pid {victim})" in errors[0][0] and (seen > 0).all()
        what = f"after {rounds} rounds: {len(errors)} EnvError" + (f" in {errors[0][1]:.2f} s" if errors else "")
        if lost:
            what += f"; {lost} env steps in flight lost (those envs start over)"
        if not ok:
            what += f"; results per env after it: {seen.tolist()}; {[e for e, _ in errors]}"
        return Outcome(ok, what)

    return inject


def cpp_env_raises(folder: Path, rng: random.Random) -> Outcome:
    """Dummy-v0 (C++ threads), 32 envs in async batches of 8: 2,000 rounds, each action 7 (which throws) with
    probability 1%. Every throw must be one EnvError naming its env, and every env must still step at the end."""
    import numpy as np

    import rlfast

    with rlfast.make("Dummy-v0", 32, batch_size=8, num_threads=2, throw_on_action=7) as pool:
        pool.async_reset()
        thrown, errors, last = 0, 0, np.zeros(32, int)
        for r in range(2000):
            try:
                *_, info = pool.recv()
                ids = info["env_id"].numpy().copy()
                last[ids] = r
            except rlfast.EnvError as err:
                errors += str(err).count("was told to fail on action 7")
                ids = err.env_ids.numpy().copy()
            actions = np.array([7 if rng.random() < 0.01 else 0 for _ in ids])
            thrown += int((actions == 7).sum())
            pool.send(actions, ids)
        pending = thrown - errors  # throws sent in the last rounds whose batches were not received
        ok = 0 <= pending <= 32 and (last > 1900).all()
        return Outcome(ok, f"{thrown} throws, {errors} named in EnvErrors ({pending} still in flight at the end)")


FAULTS: dict[str, Callable[[Path, random.Random], Outcome]] = {
    "worker_sigkill": worker("sigkill"),
    "worker_sigsegv": worker("sigsegv"),
    "worker_hang": worker("hang"),
    "cpp_env_raises": cpp_env_raises,
    "sigkill": sigkill,
    "sigkill_dqn_replay": lambda folder, rng: sigkill(folder, rng, "dqn.py"),
    **{kind: broken_checkpoint(kind) for kind in ("truncated", "corrupt", "other_script", "other_env", "bad_flag")},
    "disk_full": disk_full,
    "disk_full_tmpfs": disk_full_tmpfs,
    "ctrl_c_make": ctrl_c("make"),
    "ctrl_c_compile": ctrl_c("compile"),
    "ctrl_c_save": ctrl_c("save"),
}


def main(args: Args) -> int:
    rng = random.Random(args.seed)
    names = args.faults or tuple(FAULTS)
    unknown = sorted(set(names) - set(FAULTS))
    if unknown:
        raise SystemExit(f"error: unknown faults {unknown}; known: {', '.join(FAULTS)}")
    rows, failed = [], 0
    for name in names:
        outcomes = []
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory(prefix=f"fault_{name}_") as tmp:
                outcomes.append(FAULTS[name](Path(tmp), rng))
            print(f"{name}: {'ok' if outcomes[-1].ok else 'FAILED'}: {outcomes[-1].what}", flush=True)
        bad = [o for o in outcomes if not o.ok]
        failed += len(bad)
        lost = max(o.lost_s for o in outcomes)
        rows.append(f"| {name} | {len(outcomes)} | {(bad or outcomes)[0].what} | {lost:.1f} s | "
                    f"{len(outcomes) - len(bad)}/{len(outcomes)} |")  # fmt: skip
    print("\n| fault | injected | outcome (first failure, else first) | data lost (max) | as promised |")
    print("| --- | --- | --- | --- | --- |")
    print("\n".join(rows))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(tyro.cli(Args)))
