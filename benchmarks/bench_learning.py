"""Learning benchmark: a trainer + preset over several seeds, its return against env steps and wall time.

Sample efficiency (return against env steps) does not depend on the machine; wall time does, and the
table says on which machine it was measured. Each seed is its own trainer process (``--jobs`` at a
time, the cores split between them and each pinned to its share) writing to ``OUT/runs``; its output
goes to ``OUT/logs/seed<N>.log``. Running the same command again reads finished seeds back and resumes
unfinished ones from their last checkpoint (``--resume``), so a long benchmark can span sessions (a seed whose
trainer ended but was not marked finished, because this process stopped first, is marked when its trainer says so).

    python benchmarks/bench_learning.py --out results/hopper_cleanrl --env-id Hopper-v5 --seeds 1 2 3
    python benchmarks/bench_learning.py --out results/ant_5min --config configs/ant_5min.toml --env-id Ant-v5 \\
        --seeds 1 2 3 --threshold 5000 -- --save-minutes 2      # flags after -- go to the trainer
    python benchmarks/bench_learning.py --out results/ant_5min --report-only   # tables and plot from what is there

Writes ``OUT/curves.json`` (per seed: the mean return of the last ``--window`` episodes at each episode
end, against env steps and wall seconds, thinned to at most 400 points; the summary), ``OUT/curves.png``
(both curves, the threshold, the published reference) and ``OUT/table.md`` (per seed: final, last-10% and
best windowed mean, steps and minutes to the threshold, steps/s; the median over seeds; the windowed mean at
equal steps for these runs and the ``--compare`` folders' runs; the reference with its source), and prints
the table. The equal-steps values come from every episode (``curves.json`` keeps them per run as ``at``, on
a grid of a tenth of the run's order of magnitude: every 100k steps for a 1-9M-step run), not from the
thinned curve.
"""

import bisect
import json
import math
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Optional, Sequence

import tyro
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlfast.algos.runargs import RUN_COMPLETE
from rlfast.algos.runlog import safe_env_id
from rlfast.algos.signals import Interrupts

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
"""the trainers' folder"""
CLEANRL_V4_1M = "CleanRL ppo_continuous_action.py, {task}-v4, 1M steps, 3 seeds (docs.cleanrl.dev, PPO page)"
REFERENCES = {  # published figures: (what, env steps, mean, +- or None); MuJoCo v4 where v5 is not published
    "HalfCheetah-v5": [(CLEANRL_V4_1M.format(task="HalfCheetah"), 1_000_000, 1442.64, 46.03)],
    "Hopper-v5": [(CLEANRL_V4_1M.format(task="Hopper"), 1_000_000, 2382.86, 271.74)],
    "Walker2d-v5": [(CLEANRL_V4_1M.format(task="Walker2d"), 1_000_000, 2287.95, 571.78)],
    "Humanoid-v5": [(CLEANRL_V4_1M.format(task="Humanoid"), 1_000_000, 716.11, 49.08)],
    "Ant-v5": [
        ("CleanRL ppo_continuous_action.py, Ant-v4, 8M steps, 10 seeds (docs.cleanrl.dev, RPO page)", 8_000_000,
         1824.17, 905.78),
        ("rl_games ant_envpool.yaml, Ant-v5, best after 8.2M steps, 1 seed (rl_games docs)", 8_200_000, 4429.0, None),
    ],
    "Pong-v5": [  # where the published curves pass 18 (their 10M-step finals: docs/results/index.md)
        ("rl_games ppo_pong_envpool.yaml, ~18 at ~0.85M steps, 1 seed (its plot and docs)", 850_000, 18.0, None),
        ("rl_games ppo_pong_envpool.yaml, ~20 at ~1.2-1.5M steps, 1 seed (its plot and docs)", 1_350_000, 20.0, None),
        ("CleanRL ppo_atari_envpool.py, ~18 at ~3.3-3.6M steps, 3 seeds (docs.cleanrl.dev)", 3_450_000, 18.0, None),
        ("CleanRL dqn_atari.py, ~18 at ~3.2M steps, 3 seeds (docs.cleanrl.dev)", 3_200_000, 18.0, None),
    ],
    "gymnasium:LunarLander-v3": [  # a Python env in rlfast's worker processes ("Your own environment")
        ("rl-baselines3-zoo PPO, LunarLander-v2, final policy evaluated after 1M steps (its benchmark.md)", 1_000_000,
         242.12, 31.82),
    ],
    "rlfast.vizdoom:DoomHealthGatheringSupreme-v0": [  # frames / 4 = agent steps (frame skip 4)
        ("Sample Factory, the Hugging Face Deep RL course's recipe (GRU, --train_for_env_steps=4000000 frames): "
         "the best training means (Sample Factory's running average) of 7 course models on Hugging Face, "
         "22.2-26.8 at 3.64-3.93M frames (their checkpoint names)", 950_000, 24.98, 1.88),
    ],
}  # fmt: skip
MAX_POINTS = 400
MAX_MARKS = 12
"""columns of the equal-steps table at most (``equal_steps`` keeps the multiples of a coarser grid when more)"""
PAUSE_S = 120.0  # a gap this long between two iterations is a pause (a resume in another session), not training


@dataclass
class Args:
    out: str
    """the results folder (runs/, logs/, curves.json, curves.png, table.md)"""
    script: str = "ppo_continuous.py"
    """the trainer in scripts/"""
    env_id: str = "HalfCheetah-v5"
    """the task"""
    config: Optional[str] = None
    """the trainer's preset (configs/*.toml); None: the trainer's defaults"""
    seeds: tuple[int, ...] = (1, 2, 3)
    """one run per seed"""
    total_timesteps: Optional[int] = None
    """env steps per run (None: the preset's or trainer's)"""
    jobs: Optional[int] = None
    """runs at a time (None: min(seeds, cores)); the cores are split evenly between them"""
    threshold: Optional[float] = None
    """a return to report the steps and minutes to (the windowed mean first reaching it)"""
    window: int = 20
    """episodes in the mean (the trainers' progress line and --target-return use 20)"""
    label: Optional[str] = None
    """the name of these runs in the table and plot (None: script + config)"""
    report_only: bool = False
    """run nothing: tables and plot from the runs already in OUT/runs"""
    compare: tuple[str, ...] = ()
    """other results folders (their curves.json, from this script) to set beside these runs: dashed in the
    plot's steps panel, one summary line each in the table (e.g. the same preset in float32)"""


def run_dir(out: Path, env_id: str, seed: int) -> Optional[Path]:
    """This seed's run dir under ``out/runs`` (the newest, if several), or None."""
    dirs = sorted((out / "runs").glob(f"{safe_env_id(env_id)}__*__{seed}__*"), key=lambda p: p.stat().st_mtime)
    return dirs[-1] if dirs else None


def flag_value(flags: list[str], name: str) -> Optional[str]:
    """The value of the last ``name VALUE`` (or ``name=VALUE``) in ``flags``, or None."""
    value = None
    for i, f in enumerate(flags):
        if f == name and i + 1 < len(flags):
            value = flags[i + 1]
        elif f.startswith(name + "="):
            value = f.split("=", 1)[1]
    return value


def threads_given(cmd: list[str]) -> str:
    """The env and torch threads a trainer's command line gives it: "2", or "env 1, torch 2" where they differ."""
    env, torch_ = flag_value(cmd, "--num-threads"), flag_value(cmd, "--torch-threads")
    if env == torch_:
        return env or "?"
    return f"env {env or '?'}, torch {torch_ or '?'}"


def command(args: Args, seed: int, out: Path, cores: list[int], trainer_flags: list[str]) -> list[str]:
    """The trainer's command line for ``seed``: a fresh run, or ``--resume`` of one with a checkpoint. Its threads
    are the cores it is pinned to, unless ``trainer_flags`` name them (``--num-threads 1 --torch-threads 1``)."""
    threads = [x for name in ("--num-threads", "--torch-threads") if flag_value(trainer_flags, name) is None
               for x in (name, str(len(cores)))]  # fmt: skip
    existing = run_dir(out, args.env_id, seed)
    steps = ["--total-timesteps", str(args.total_timesteps)] if args.total_timesteps else []
    if existing is not None and (existing / "checkpoint.pt").exists():
        return [sys.executable, str(SCRIPTS / args.script), "--resume", str(existing), *threads, *steps, *trainer_flags]
    cmd = [sys.executable, str(SCRIPTS / args.script), "--env-id", args.env_id, "--seed", str(seed),
           "--runs-dir", str(out / "runs"), *threads]  # fmt: skip
    cmd += ["--config", args.config] if args.config else []
    return cmd + steps + trainer_flags


def shown(cmd: list[str]) -> str:
    """``cmd`` as a user would type it from the project root: ``python3 scripts/...``, no machine paths."""
    root = SCRIPTS.parent
    parts = ["python3" if c == sys.executable else os.path.relpath(c, root) if c.startswith(str(root)) else c
             for c in cmd]  # fmt: skip
    return " ".join(parts)


def already_done(log: Path) -> bool:
    """Whether the trainer's last words in ``log`` were that its checkpoint holds every iteration asked for: a run
    that finished but was not marked (this process stopped between the trainer's end and the ``finished`` file)."""
    last = log.read_text().rstrip().rsplit("\n", 1)[-1]
    return last.startswith("error: ") and last.endswith(RUN_COMPLETE)


def run_seeds(args: Args, out: Path, trainer_flags: list[str]) -> None:
    """Runs every seed not yet finished (marked by a ``finished`` file in its run dir), ``jobs`` at a time.

    Ctrl-C or SIGTERM (also in a background job, whose SIGINT is ignored from birth) reaches this process only:
    the trainers run in sessions of their own, and each gets exactly one SIGINT from here, so it saves its
    checkpoint once (a second signal during the save would cut it short) and the same command resumes it.
    """
    cores = sorted(os.sched_getaffinity(0))
    todo = [s for s in args.seeds if not ((d := run_dir(out, args.env_id, s)) and (d / "finished").exists())]
    jobs = max(1, min(args.jobs or len(todo) or 1, len(cores)))
    share = len(cores) // jobs
    (out / "logs").mkdir(parents=True, exist_ok=True)
    running: dict[int, tuple[int, subprocess.Popen, object]] = {}  # slot -> (seed, process, log file)
    interrupts = Interrupts()
    interrupts.catch()
    try:
        while todo or running:
            for slot in [s for s in range(jobs) if s not in running]:
                if not todo:
                    break
                seed, mine = todo.pop(0), cores[slot * share : (slot + 1) * share]
                cmd = command(args, seed, out, mine, trainer_flags)
                log = open(out / "logs" / f"seed{seed}.log", "a")
                log.write(f"\n$ {shown(cmd)}\n")
                log.flush()
                env = {**os.environ, "OMP_NUM_THREADS": str(len(mine))}
                proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                        preexec_fn=lambda c=mine: os.sched_setaffinity(0, c))  # fmt: skip
                running[slot] = (seed, proc, log)
                print(f"seed {seed}: started on cores {mine} (log: {log.name})", flush=True)
                placement = {"cores": len(mine), "threads": threads_given(cmd), "runs_at_once": jobs,
                             "cpu": cpu_model()}  # fmt: skip
                (out / "logs" / f"seed{seed}.json").write_text(json.dumps(placement) + "\n")
            time.sleep(1.0)
            for slot, (seed, proc, log) in list(running.items()):
                if proc.poll() is None:
                    continue
                log.close()
                del running[slot]
                if proc.returncode in (130, 143):  # Ctrl-C / SIGTERM: checkpoint saved
                    raise SystemExit(f"seed {seed} was interrupted: the same command resumes it")
                if proc.returncode != 0 and not already_done(Path(log.name)):
                    raise SystemExit(f"seed {seed} failed with status {proc.returncode}: see {log.name}")
                (run_dir(out, args.env_id, seed) / "finished").touch()
                print(f"seed {seed}: finished", flush=True)
    except KeyboardInterrupt:
        for seed, proc, _ in running.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
                print(f"seed {seed}: interrupted, saving its checkpoint", flush=True)
        raise SystemExit("interrupted: the same command resumes the unfinished seeds") from None
    finally:  # a second Ctrl-C stops this wait; the trainers still finish saving in their own sessions
        interrupts.restore()
        for _, proc, log in running.values():
            proc.wait()
            log.close()


def threads_from_log(log: Path) -> Optional[str]:
    """``threads_given`` of the last command line in a seed's log (each start writes one as ``$ ...``)."""
    if not log.exists():
        return None
    starts = [line[2:].split() for line in log.read_text().splitlines() if line.startswith("$ ")]
    return threads_given(starts[-1]) if starts else None


def cpu_model() -> str:
    """The CPU's model name (Linux), for the table: wall times depend on it."""
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return "unknown CPU"


def active_seconds(times: list[float]) -> list[float]:
    """Wall times of successive iterations -> seconds of training at each, pauses (``PAUSE_S``) left out."""
    out, total = [0.0], 0.0
    steps = [b - a for a, b in zip(times, times[1:])]
    typical = statistics.median(steps) if steps else 0.0
    for dt in steps:
        total += dt if dt < PAUSE_S else typical
        out.append(total)
    return out


def curve(path: Path, window: int) -> dict:
    """One run's windowed-mean curve and summary from its tensorboard events."""
    acc = EventAccumulator(str(path), size_guidance={"scalars": 0})
    acc.Reload()
    tags = set(acc.Tags().get("scalars", []))

    def scalars(tag: str) -> list:  # a run stopped early may not have logged them yet
        return acc.Scalars(tag) if tag in tags else []

    sps = scalars("charts/SPS")  # one per iteration: its end's step and wall time
    first_duration = sps[0].step / max(sps[0].value, 1e-9) if sps else 0.0
    seconds = [first_duration + s for s in active_seconds([e.wall_time for e in sps])]
    iter_steps = [e.step for e in sps]

    def at(step: int) -> float:  # seconds of training when `step` was reached (linear within an iteration)
        i = min(max(next((k for k, s in enumerate(iter_steps) if s >= step), len(iter_steps) - 1), 0),
                len(iter_steps) - 1)  # fmt: skip
        s0, t0 = (iter_steps[i - 1], seconds[i - 1]) if i else (0, 0.0)
        return t0 + (seconds[i] - t0) * (step - s0) / max(iter_steps[i] - s0, 1)

    # In logging order within a step (a stable sort on the step alone): APPO logs a batch's episodes at one step, and
    # ordering them by value too would put the best last, in every window.
    episodes = [(e.step, e.value) for e in sorted(scalars("charts/episodic_return"), key=lambda e: e.step)]
    points, recent = [], []
    for step, ret in episodes:
        recent = (recent + [ret])[-window:]
        if len(recent) == window:
            points.append((step, at(step), sum(recent) / window))
    keep = points[:: max(1, math.ceil(len(points) / MAX_POINTS))] + points[-1:]
    steps = iter_steps[-1] if iter_steps else 0
    evals = sorted(scalars("eval/episodic_return"), key=lambda e: e.step)  # the trainer's --eval-every evaluations
    return {
        "run_dir": path.name,
        "finished": (path / "finished").exists(),
        "steps": steps,
        "seconds": seconds[-1] if seconds else 0.0,
        "sps": steps / seconds[-1] if seconds and seconds[-1] else 0.0,
        "episodes": len(episodes),
        "final": points[-1][2] if points else None,
        "last_tenth": statistics.mean(tail) if (tail := [p[2] for p in points if p[0] >= 0.9 * steps]) else None,
        "best": max(p[2] for p in points) if points else None,
        "curve": {"steps": [p[0] for p in keep], "seconds": [round(p[1], 1) for p in keep],
                  "mean_return": [round(p[2], 2) for p in keep]},  # fmt: skip
        "at": at_marks(points, steps),
        "evals": {"steps": [e.step for e in evals], "seconds": [round(at(e.step), 1) for e in evals],
                  "mean_return": [round(e.value, 2) for e in evals]},  # fmt: skip
        "best_eval": max(((e.value, e.step) for e in evals), key=lambda v: (v[0], -v[1]), default=None),
        "_points": points,
    }


def at_marks(points: list[tuple[int, float, float]], steps: int) -> dict[str, float]:
    """``{mark: windowed mean}`` at every multiple of a tenth of ``steps``' order of magnitude up to ``steps``
    (100k, 200k, ... for a 1-9M-step run): the mean of the last full window ending at or before the mark."""
    if steps <= 0 or not points:
        return {}
    grid, at = mark_grid(steps), [p[0] for p in points]
    ends = ((mark, bisect.bisect_right(at, mark) - 1) for mark in range(grid, steps + 1, grid))
    return {str(mark): round(points[i][2], 2) for mark, i in ends if i >= 0}


def mark_grid(steps: int) -> int:
    """The steps between two of a run's equal-steps marks: a tenth of ``steps``' order of magnitude."""
    return 10 ** max(int(math.log10(steps)) - 1, 0)


def equal_steps(groups: Sequence[tuple[str, dict]]) -> list[str]:
    """The equal-steps table's lines: one row per run of ``groups`` (``(name, curves.json runs)``), one column
    per mark held by any of them on the coarsest run's grid (a run stopped at 0.3M, marked every 10k, beside
    runs of 1.5M marked every 100k gets the 100k columns: even steps between columns), at most ``MAX_MARKS``:
    the multiples of the smallest multiple of that grid leaving no more. Runs from an older curves.json (no
    ``at``) are left out."""
    held = [(f"{name}seed {seed}", r) for name, runs in groups for seed, r in runs.items() if r.get("at")]
    if not held:
        return []
    grid, k = max(mark_grid(r["steps"]) for _, r in held), 1
    rows = [(name, r["at"]) for name, r in held]
    marks = sorted({int(m) for _, at in rows for m in at if int(m) % grid == 0})
    while len(kept := [m for m in marks if m % (k * grid) == 0]) > MAX_MARKS:
        k += 1
    marks = kept
    cell = lambda at, m: fmt_return(at.get(str(m)))  # noqa: E731
    head = [f"{m / 1e6:g}M" if m >= 100_000 else f"{m:,}" for m in marks]
    title = "Windowed mean at equal steps (the last full window ending at or before each mark, from every episode):"
    return ["", title, "", "| run | " + " | ".join(head) + " |", "|---|" + "---|" * len(marks)] + [
        f"| {name} | " + " | ".join(cell(at, m) for m in marks) + " |" for name, at in rows]  # fmt: skip


def machines(runs: dict) -> str:
    """The CPU(s) the runs trained on, as their placement files recorded it (this machine's for runs without)."""
    cpus = sorted({(r.get("placement") or {}).get("cpu") or cpu_model() for r in runs.values()}) or [cpu_model()]
    return " / ".join(cpus)


def first_reaching(points: list[tuple[int, float, float]], threshold: float) -> tuple[Optional[int], Optional[float]]:
    for step, sec, mean in points:
        if mean >= threshold:
            return step, sec
    return None, None


def fmt(x: Optional[float], spec: str = ",.0f") -> str:
    return "-" if x is None else format(x, spec)


def fmt_return(x: Optional[float]) -> str:
    """A return with the digits its size needs: 5,091 / 17.6 / 0.82."""
    return fmt(x, ",.0f" if x is not None and abs(x) >= 100 else ".1f" if x is not None and abs(x) >= 10 else ".2f")


def report(args: Args, out: Path) -> dict:
    """Reads every seed's run, writes curves.json, table.md and curves.png, prints the table."""
    label = args.label or f"{args.script}" + (f" --config {args.config}" if args.config else " (defaults)")
    runs = {}
    missing = [seed for seed in args.seeds if run_dir(out, args.env_id, seed) is None]
    if args.report_only and missing and (out / "curves.json").exists():
        raise SystemExit(f"error: {out / 'runs'} holds no run of seed(s) {missing}: the committed curves.json and "
                         "table.md are their record (run dirs stay out of the repository); without --report-only "
                         "this command trains them anew")  # fmt: skip
    for seed in args.seeds:
        path = run_dir(out, args.env_id, seed)
        if path is not None and list(path.glob("events.out.tfevents.*")):
            runs[seed] = curve(path, args.window)
            placed = out / "logs" / f"seed{seed}.json"
            runs[seed]["placement"] = json.loads(placed.read_text()) if placed.exists() else None
            if runs[seed]["placement"] and "threads" not in runs[seed]["placement"]:  # placed before it was recorded
                runs[seed]["placement"]["threads"] = threads_from_log(out / "logs" / f"seed{seed}.log")
    to_it = f"steps to {args.threshold:,g} | minutes to it | " if args.threshold is not None else ""
    greedy = any(r["best_eval"] for r in runs.values())  # the runs evaluated greedy policies (--eval-every)
    evals = "best greedy evaluation (step) | " if greedy else ""
    rows = [f"{label} on {args.env_id}, mean return of the last {args.window} training episodes (final: at the end; "
            f"last 10%: averaged over the last 10% of the steps; best: the highest); machine: {machines(runs)}", "",
            "| seed | steps | final | last 10% | best | " + to_it + evals + "steps/s | cores (threads) | status |",
            "|---|---|---|---|---|" + ("---|---|" if to_it else "") + ("---|" if greedy else "") + "---|---|---|"]
    for seed, r in runs.items():
        if args.threshold is not None:
            r["to_threshold"] = dict(zip(("steps", "seconds"), first_reaching(r["_points"], args.threshold)))
            r["to_threshold"]["threshold"] = args.threshold
        cells = [str(seed), f"{r['steps']:,}", fmt_return(r["final"]), fmt_return(r["last_tenth"]),
                 fmt_return(r["best"])]
        if args.threshold is not None:
            t = r["to_threshold"]
            cells += [fmt(t["steps"]), fmt(t["seconds"] / 60 if t["seconds"] is not None else None, ".1f")]
        if greedy:
            cells.append(f"{fmt_return(r['best_eval'][0])} ({r['best_eval'][1]:,})" if r["best_eval"] else "-")
        where = "-"
        if r["placement"]:
            given = r["placement"].get("threads")
            where = f"{r['placement']['cores']} ({given})" if given else str(r["placement"]["cores"])
        cells += [fmt(r["sps"]), where, "finished" if r["finished"] else "running or stopped"]
        rows.append("| " + " | ".join(cells) + " |")
    finals = [r["final"] for r in runs.values() if r["final"] is not None]
    bests = [r["best"] for r in runs.values() if r["best"] is not None]
    tenths = [r["last_tenth"] for r in runs.values() if r["last_tenth"] is not None]
    if finals:
        reach = ""
        if args.threshold is not None:
            hits = [r["to_threshold"] for r in runs.values() if r["to_threshold"]["steps"] is not None]
            if hits and len(hits) == len(runs):
                reach = (f" {statistics.median(t['steps'] for t in hits):,.0f} |"
                         f" {statistics.median(t['seconds'] for t in hits) / 60:.1f} |")  # fmt: skip
            else:
                reach = f" {len(hits)} of {len(runs)} seeds reached it | |"
        rows.append(f"| median | | {fmt_return(statistics.median(finals))} | {fmt_return(statistics.median(tenths))} | "
                    f"{fmt_return(statistics.median(bests))} |{reach}{' |' if greedy else ''} | | |")  # fmt: skip
    compared = [json.loads((Path(c) / "curves.json").read_text()) for c in args.compare]
    if compared:
        rows += ["", "Beside (the same summary of other runs, from their curves.json):"]
    for other in compared:
        rows.append(f"- {other['label']}: " + summary(other["runs"].values(), args.threshold))
    rows += equal_steps([("", runs)] + [(f"{other['label']}, ", other["runs"]) for other in compared])
    refs = REFERENCES.get(args.env_id, [])
    if refs:
        rows += ["", "Published reference:"] + [
            f"- {what}: {mean:,.0f}" + (f" ± {pm:,.0f}" if pm else "") + f" at {steps / 1e6:g}M steps"
            for what, steps, mean, pm in refs
        ]
    table = "\n".join(rows) + "\n"
    (out / "table.md").write_text(table)
    print(table)
    for r in runs.values():
        del r["_points"]
    result = {"args": asdict(args), "label": label, "references": refs, "runs": runs}
    (out / "curves.json").write_text(json.dumps(result, indent=1) + "\n")
    plot(result, out / "curves.png", args, compared)
    return result


def summary(runs: Any, threshold: Optional[float]) -> str:
    """One line of a group of runs (curves.json entries): seeds, steps, median final / last 10% / best, and how
    many reached ``threshold`` (by the first step their windowed mean reached it)."""
    runs = list(runs)
    med = lambda key: fmt(statistics.median(v) if (v := [r[key] for r in runs if r[key] is not None]) else None)  # noqa: E731
    line = (f"{len(runs)} seeds, {fmt(min((r['steps'] for r in runs), default=None))} steps or more; median final "
            f"{med('final')}, last 10% {med('last_tenth')}, best {med('best')}")  # fmt: skip
    if threshold is not None:  # the step its report found, else the first of the (thinned) curve's points
        def hit(r: dict) -> Optional[int]:
            # (older curves.json files record no threshold with it)
            if "to_threshold" in r and r["to_threshold"].get("threshold", threshold) == threshold:
                return r["to_threshold"]["steps"]
            c = r["curve"]
            return first_reaching(list(zip(c["steps"], c["seconds"], c["mean_return"])), threshold)[0]

        steps = sorted(h for h in map(hit, runs) if h is not None)
        reached = [f"{h:,}" for h in steps]
        line += f"; {len(reached)} of {len(runs)} reached {threshold:g}"
        line += f" (at {', '.join(reached)})" if reached else ""
    return line


def plot(result: dict, path: Path, args: Args, compared: Sequence[dict] = ()) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (by_steps, by_time) = plt.subplots(1, 2, figsize=(12, 4.5))
    for seed, r in result["runs"].items():
        c, e = r["curve"], r.get("evals") or {"steps": []}
        (line,) = by_steps.plot([s / 1e6 for s in c["steps"]], c["mean_return"], label=f"seed {seed}")
        by_time.plot([s / 60 for s in c["seconds"]], c["mean_return"], label=f"seed {seed}")
        if e["steps"]:  # --eval-every's greedy evaluations, as dots of the seed's colour
            dots = {"linestyle": ":", "marker": "o", "markersize": 3, "linewidth": 0.8, "color": line.get_color()}
            by_steps.plot([s / 1e6 for s in e["steps"]], e["mean_return"], label=f"seed {seed}, greedy evaluations",
                          **dots)  # fmt: skip
            by_time.plot([s / 60 for s in e["seconds"]], e["mean_return"], **dots)
    for other in compared:  # steps only: their wall times are another machine's or another setting's
        for seed, r in other["runs"].items():
            c = r["curve"]
            by_steps.plot([s / 1e6 for s in c["steps"]], c["mean_return"], linestyle="--", linewidth=1,
                          label=f"{other['label']}, seed {seed}")  # fmt: skip
    notes = []  # the references' numbers by their stars, their text under the figure: long labels by the
    for i, (what, steps, mean, pm) in enumerate(result["references"], 1):  # stars overlapped where close
        by_steps.errorbar([steps / 1e6], [mean], yerr=[pm] if pm else None, fmt="k*", capsize=4, markersize=10)
        by_steps.annotate(f"[{i}]", (steps / 1e6, mean), fontsize=7, xytext=(0, 7 + 8 * (i % 2)),
                          textcoords="offset points", ha="center")  # fmt: skip
        notes.append(f"[{i}] {what}")
    for ax in (by_steps, by_time):
        if args.threshold is not None:
            ax.axhline(args.threshold, color="gray", linestyle="--", linewidth=1)
        ax.set_ylabel(f"mean return, last {args.window} episodes")
        ax.grid(alpha=0.3)
    by_steps.set_xlabel("env steps (millions)")
    cores = sorted({r["placement"]["cores"] for r in result["runs"].values() if r.get("placement")})
    per_run = f", {'/'.join(map(str, cores))} core(s) per run" if cores else ""
    by_time.set_xlabel(f"wall minutes of training ({machines(result['runs'])}{per_run})")
    by_steps.legend(fontsize=7, loc="lower right")
    fig.suptitle(f"{result['label']} on {args.env_id}", fontsize=10)
    fig.tight_layout()
    if notes:
        fig.text(0.01, 0.0, "\n".join(["references (stars):", *notes]), fontsize=7, va="top", ha="left")
    fig.savefig(path, dpi=80, bbox_inches="tight")
    plt.close(fig)


def main(argv: list[str]) -> None:
    split = argv.index("--") if "--" in argv else len(argv)
    args = tyro.cli(Args, args=argv[:split])
    out = Path(args.out)
    if not args.report_only:
        run_seeds(args, out, argv[split + 1 :])
    report(args, out)


if __name__ == "__main__":
    main(sys.argv[1:])
