"""The five-minute demos on the machine at hand: Pong and Ant trained to a threshold, timed from the command's start.

Each seed is the preset's command exactly as a user types it, run alone on all the cores:

    python scripts/ppo_atari.py --config configs/pong_cpu.toml --seed N --target-return 18
    python scripts/ppo_continuous.py --config configs/ant_cpu.toml --seed N --target-return 5000

and the wall time is the command's, from its start (imports and env creation included) to the moment the
20-episode mean of its training episodes first reaches the threshold. The trainer stops where its own check, the
same mean at an iteration's end, holds: at that iteration's end, or later where the mean falls back under the
threshold within it (its final policy, evaluated below, is then a later one than the time counts). With
``--peer rl_games`` the same seeds of rl_games' own EnvPool recipe for the task run the same way, one after
the other on the same cores (benchmarks/peers/rlgames_demo.py says what it changes for a CPU; rl_games lives
in its own environment: ``--peer-python``).

    python benchmarks/bench_demo.py --demo pong --seeds 1 2 3
    python benchmarks/bench_demo.py --demo ant --seeds 1 --peer rl_games --peer-python venv-rlg/bin/python
    python benchmarks/bench_demo.py --demo pong --report-only        # the table and plot from OUT

A seed already measured in OUT (its ``row.json``) is not run again; the table and plot show every row in OUT,
whichever seeds and peer a call names.

Prints and writes (``OUT/<demo>/``) one row per system and seed: reached or not, minutes and env steps to the
threshold, steps/s (the last logged step over the wall time from the command's start), and the CPU (model and
its AVX-512/BF16/AMX flags); ``curves.json`` and ``curves.png`` (the 20-episode mean against wall minutes and
against env steps, both systems). A run that has not reached the threshold after ``--cap-minutes`` is stopped
(Ctrl-C: it saves its checkpoint) and counted as not reached, with its best mean. Ctrl-C or SIGTERM to this
benchmark stops the run the same way, then the benchmark (the seeds measured so far keep their rows).
After its timing each rlfast run's final policy plays ``--evaluate`` games (``scripts/evaluate.py``, the issue's
second criterion) twice: greedy (the argmax action) and sampled from the policy (``--sample``, as CleanRL's
``ppo_eval.py`` plays PPO's policies). Their means and spreads go in the table, and how many seeds hold the
threshold each way. Both are kept because on a deterministic game (Pong-v5 here has no sticky actions) the greedy
policy replays the same exchange after each point, so each greedy game tends to be all won or all lost;
``--evaluate-missing`` adds what a row in OUT lacks of the two.
"""

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import tyro
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlfast.algos.signals import Interrupts

ROOT = Path(__file__).resolve().parents[1]
DEMOS = {  # demo -> (trainer, preset, threshold, env id, rl_games' recipe)
    "pong": ("ppo_atari.py", "configs/pong_cpu.toml", 18.0, "Pong-v5", "atari/ppo_pong_envpool.yaml"),
    "ant": ("ppo_continuous.py", "configs/ant_cpu.toml", 5000.0, "Ant-v5", "mujoco/ant_envpool.yaml"),
}
WINDOW = 20
"""episodes in the mean that must reach the threshold (rlfast's --target-return window; rl_games' is set to it)"""
EVAL_TIMEOUT_S = 1800
"""the most one evaluation of a run may take (a few minutes for 10 Pong games on 2 cores)"""
EVALUATIONS = {"greedy": ("evaluate.txt", ()), "sampled": ("evaluate_sampled.txt", ("--sample",))}
"""how the final policy plays its games -> (the file in OUT/<demo>/rlfast_seed<N>/ with evaluate.py's output,
evaluate.py's flags for it)"""


@dataclass
class Args:
    demo: str = "pong"
    """pong or ant"""
    seeds: tuple[int, ...] = (1, 2, 3)
    out: str = "results/demo_cpu"
    """folder: OUT/<demo>/ gets the runs, logs, curves.json, curves.png and table.md"""
    cap_minutes: float = 15.0
    """stop a run that has not reached the threshold after this long"""
    peer: Optional[str] = None
    """also run this peer's recipe on the same seeds: rl_games"""
    peer_python: str = sys.executable
    """the Python that has the peer installed (rl_games: pip install rl-games; envpool)"""
    peer_flags: tuple[str, ...] = ()
    """more flags for the peer's command (benchmarks/peers/rlgames_demo.py --help), written with an equals sign:
    --peer-flags=--no-contact-forces"""
    preset: Optional[str] = None
    """another rlfast preset than the demo's (to compare presets)"""
    evaluate: int = 10
    """games of scripts/evaluate.py on each rlfast run's final checkpoint once its timing ends, greedy and then
    sampled (0: none): the scores go in the table and in OUT/<demo>/rlfast_seed<N>/evaluate.txt and
    evaluate_sampled.txt"""
    evaluate_missing: bool = False
    """run no seed; evaluate each rlfast row in OUT whose greedy or sampled games are missing, then report"""
    report_only: bool = False


def cpu() -> str:
    """The CPU's model and the flags that decide the CNN's speed."""
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    model = next((ln.split(":", 1)[1].strip() for ln in text.splitlines() if ln.startswith("model name")), "?")
    flags = set(next((ln.split(":", 1)[1].split() for ln in text.splitlines() if ln.startswith("flags")), []))
    has = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in flags]
    return f"{model}, {os.cpu_count()} cores ({' '.join(has) or 'no AVX2'})"


def windowed(points: list[tuple[float, int, float]]) -> list[tuple[float, int, float]]:
    """(wall s, step, episode return) in order -> (wall s, step, mean of the last WINDOW) from WINDOW on."""
    out = []
    for i in range(WINDOW - 1, len(points)):
        t, step, _ = points[i]
        out.append((t, step, statistics.fmean(r for _, _, r in points[i - WINDOW + 1 : i + 1])))
    return out


def scalars(folder: Path, tag: str) -> list:
    events = sorted(folder.rglob("events.out.tfevents.*"))
    found = []
    for path in events:
        acc = EventAccumulator(str(path), size_guidance={"scalars": 0})
        acc.Reload()
        if tag in acc.Tags().get("scalars", []):
            found += acc.Scalars(tag)
    return sorted(found, key=lambda e: e.wall_time)


def stop(proc: subprocess.Popen) -> None:
    """One SIGINT to the run's process group (the trainers save a checkpoint and exit; rl_games stops), then
    SIGKILL if it has not ended within a minute."""
    os.killpg(proc.pid, signal.SIGINT)
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def run_one(system: str, args: Args, seed: int, folder: Path) -> dict:
    """Runs one seed of one system to its threshold (or the cap); returns its row with the curve."""
    trainer, preset, threshold, env_id, _ = DEMOS[args.demo]
    run_dir = folder / f"{system}_seed{seed}"
    run_dir.mkdir(parents=True, exist_ok=True)
    if system == "rlfast":
        command = [sys.executable, str(ROOT / "scripts" / trainer), "--config", str(ROOT / (args.preset or preset)),
                   "--seed", str(seed), "--target-return", str(threshold), "--runs-dir", "runs"]
    else:
        command = [args.peer_python, str(ROOT / "benchmarks" / "peers" / "rlgames_demo.py"), "--task", args.demo,
                   "--seed", str(seed), *args.peer_flags, "--out", "train"]  # fmt: skip (relative: cwd is run_dir)
    log = (run_dir / "log.txt").open("w")
    start = time.time()
    # The run has a session of its own (a terminal's Ctrl-C reaches this process only), so it is stopped from here:
    # at the cap, and on Ctrl-C or SIGTERM to this process, which then stops too.
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=run_dir, start_new_session=True)
    capped = False
    interrupts = Interrupts()
    interrupts.catch()
    try:
        proc.wait(timeout=args.cap_minutes * 60)
    except subprocess.TimeoutExpired:
        capped = True
        stop(proc)
    except KeyboardInterrupt:
        stop(proc)
        raise SystemExit(f"interrupted: {system} seed {seed} stopped (its log: {run_dir / 'log.txt'})") from None
    finally:
        interrupts.restore()
    wall = time.time() - start
    log.close()
    shown = [c if not c.startswith(str(ROOT)) else os.path.relpath(c, ROOT) for c in command[1:]]
    shown = shown[: shown.index("--runs-dir")] if "--runs-dir" in shown else shown[:-2]  # without the out folder
    row = {"system": system, "seed": seed, "command": " ".join(["python", *shown]),
           "start": start, "wall_s": wall, "cap_s": args.cap_minutes * 60, "capped": capped,
           "returncode": proc.returncode}  # fmt: skip
    row.update(measure(system, run_dir, start, threshold))
    (run_dir / "row.json").write_text(json.dumps(row))
    return row


def evaluate(run_dir: Path, episodes: int, mode: str) -> None:
    """``scripts/evaluate.py`` of the run's final checkpoint over ``episodes`` games played ``mode`` (greedy or
    sampled, after the timing, which it does not count in); its output (the summary, each game's return and length)
    into the mode's file (``EVALUATIONS``), or a line saying why there is none."""
    name, flags = EVALUATIONS[mode]
    runs = sorted(p.parent for p in (run_dir / "runs").glob("*/checkpoint.pt"))
    if len(runs) != 1:
        print(f"  no {mode} evaluation: {len(runs)} checkpoints under {run_dir / 'runs'}", flush=True)
        return
    try:
        proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "evaluate.py"), str(runs[0]), "--episodes",
                               str(episodes), "--per-episode", *flags], capture_output=True, text=True, cwd=run_dir,
                              timeout=EVAL_TIMEOUT_S)  # fmt: skip
    except subprocess.TimeoutExpired:
        print(f"  {mode} evaluation failed: not done in {EVAL_TIMEOUT_S} s", flush=True)
        return
    lines = proc.stdout.strip().splitlines()
    summary = next((x for x in lines if x.startswith("return:")), None)
    if proc.returncode != 0 or summary is None:
        why = (proc.stderr or proc.stdout).strip()[-500:]
        print(f"  {mode} evaluation failed (exit {proc.returncode}): {why}", flush=True)
        return
    (run_dir / name).write_text("\n".join(lines) + "\n")
    print(f"  {summary} over {episodes} {mode} games", flush=True)


def scores(seed_dir: Path, mode: str) -> Optional[list[float]]:
    """[mean, std] of the games played ``mode`` in the mode's file in ``seed_dir`` (``evaluate``'s, or written by
    hand from ``evaluate.py``'s output), None without one."""
    path = seed_dir / EVALUATIONS[mode][0]
    line = next((x for x in path.read_text().splitlines() if x.startswith("return:")), "") if path.exists() else ""
    parts = line.replace("return:", "").replace("±", " ").split()
    return [float(parts[0]), float(parts[1])] if len(parts) >= 2 else None


def measure(system: str, run_dir: Path, start: float, threshold: float) -> dict:
    """The curve (wall s from the command's start, env steps, 20-episode mean) and the first time it reached."""
    if system == "rlfast":
        episodes = scalars(run_dir / "runs", "charts/episodic_return")
        curve = windowed([(e.wall_time - start, e.step, e.value) for e in episodes])
        sps = scalars(run_dir / "runs", "charts/SPS")
        last = sps[-1] if sps else None
    else:  # rl_games logs the mean of its last games_to_track (20) games at each epoch
        means = scalars(run_dir / "train", "rewards/step")
        curve = [(e.wall_time - start, e.step, e.value) for e in means]
        steps = scalars(run_dir / "train", "performance/step_fps")
        last = steps[-1] if steps else None
    hit = next((p for p in curve if p[2] >= threshold), None)
    last_step, end_s = (last.step, last.wall_time - start) if last else (0, 0.0)
    return {"reached": hit is not None, "minutes": hit[0] / 60 if hit else None, "steps": hit[1] if hit else None,
            "best": max((p[2] for p in curve), default=None), "last_step": last_step,
            "sps": last_step / end_s if end_s else None,
            "curve": [[round(t, 1), s, round(m, 2)] for t, s, m in curve]}  # fmt: skip


def report(args: Args, rows: list[dict], machine: str) -> str:
    _, _, threshold, env_id, recipe = DEMOS[args.demo]
    lines = [f"{env_id} to a {WINDOW}-episode mean of {threshold:g}, from the command's start; machine: {machine}",
             "", "| system | seed | reached | minutes to it | steps to it | steps/s | best mean | final policy's "
             "games: greedy | sampled | command |", "|---|---|---|---|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        reached = r["reached"]
        lines.append(" | ".join([
            f"| {r['system']}", str(r["seed"]), "yes" if reached else "no",
            f"{r['minutes']:.1f}" if reached else f"not in {min(r['wall_s'], r['cap_s']) / 60:.1f}",
            f"{r['steps']:,}" if reached else f"({r['last_step']:,} run)",
            f"{r['sps']:,.0f}" if r["sps"] else "-",
            f"{r['best']:.1f}" if r["best"] is not None else "-",
            *(f"{r[mode][0]:.2f} ± {r[mode][1]:.2f}" if r.get(mode) else "-" for mode in EVALUATIONS),
            f"`{r['command']}` |"]))  # fmt: skip
    for system in dict.fromkeys(r["system"] for r in rows):
        mine = [r for r in rows if r["system"] == system]
        hits = [r for r in mine if r["reached"]]
        median = f"median {statistics.median(r['minutes'] for r in hits):.1f} min" if len(hits) == len(mine) else ""
        held = []
        for mode in EVALUATIONS:
            scored = [r[mode][0] for r in mine if r.get(mode)]
            held.append(f"{sum(g >= threshold for g in scored)} of {len(scored)} at {threshold:g} or more"
                        if scored else "")  # fmt: skip
        lines.append(f"| {system} | all | {len(hits)} of {len(mine)} | {median} | | | | {' | '.join(held)} | |")
    if any(r["system"] == "rl_games" for r in rows):
        lines.append(f"\nrl_games: its {recipe} on CPU (benchmarks/peers/rlgames_demo.py lists what it changes).")
    return "\n".join(lines)


def plot(args: Args, folder: Path, rows: list[dict]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    threshold = DEMOS[args.demo][2]
    fig, (by_time, by_steps) = plt.subplots(1, 2, figsize=(12, 4.2))
    colors = {"rlfast": "tab:blue", "rl_games": "tab:orange"}
    for r in rows:
        if not r["curve"]:
            continue
        t, s, m = zip(*r["curve"])
        label = f"{r['system']} seed {r['seed']}"
        by_time.plot([x / 60 for x in t], m, color=colors.get(r["system"]), alpha=0.8, label=label)
        by_steps.plot([x / 1e6 for x in s], m, color=colors.get(r["system"]), alpha=0.8, label=label)
    for ax in (by_time, by_steps):
        ax.axhline(threshold, color="gray", linestyle="--", linewidth=1)
        ax.set_ylabel(f"mean return, last {WINDOW} episodes")
        ax.grid(alpha=0.3)
    by_time.axvline(5, color="red", linestyle=":", linewidth=1)
    by_time.set_xlabel("wall minutes from the command's start")
    by_steps.set_xlabel("env steps (M)")
    if any(r["curve"] for r in rows):
        by_time.legend(fontsize=7)
    fig.suptitle(f"{DEMOS[args.demo][3]}: {cpu()}", fontsize=9)
    fig.tight_layout()
    fig.savefig(folder / "curves.png", dpi=80)
    plt.close(fig)


def saved_rows(folder: Path) -> list[dict]:
    """Every row measured in ``folder`` (``<system>_seed<N>/row.json``), whichever seeds and peer this call
    named: the folder is the record, so a call for one seed or without ``--peer`` keeps the others' rows.
    rlfast's first, then each peer's, by seed."""
    rows = [{**json.loads(p.read_text()), **{mode: scores(p.parent, mode) for mode in EVALUATIONS}}
            for p in folder.glob("*_seed*/row.json")]  # fmt: skip
    return sorted(rows, key=lambda r: (r["system"] != "rlfast", r["system"], r["seed"]))


def main(args: Args) -> None:
    if args.demo not in DEMOS:
        raise SystemExit(f"--demo must be one of {sorted(DEMOS)}, got {args.demo!r}")
    if args.evaluate_missing and args.evaluate < 1:
        raise SystemExit(f"--evaluate-missing plays --evaluate games a row lacks: --evaluate must be >= 1, got "
                         f"{args.evaluate}")  # fmt: skip
    if args.peer not in (None, "rl_games"):
        raise SystemExit(f"--peer must be rl_games, got {args.peer!r}")
    if args.peer_flags and not args.peer:
        raise SystemExit(f"--peer-flags {' '.join(args.peer_flags)} need a --peer to pass them to")
    folder = ROOT / args.out / args.demo if not Path(args.out).is_absolute() else Path(args.out) / args.demo
    folder.mkdir(parents=True, exist_ok=True)
    machine = cpu()
    systems = ["rlfast"] + ([args.peer] if args.peer else [])
    for seed in [] if args.report_only or args.evaluate_missing else args.seeds:
        for system in systems:
            if (folder / f"{system}_seed{seed}" / "row.json").exists():
                continue
            print(f"{system} seed {seed}: running (cap {args.cap_minutes:g} min)...", flush=True)
            r = run_one(system, args, seed, folder)
            print(f"  {'reached' if r['reached'] else 'not reached'}"
                  + (f" in {r['minutes']:.2f} min at {r['steps']:,} steps" if r["reached"] else "")
                  + f"; {r['sps'] or 0:,.0f} steps/s", flush=True)  # fmt: skip
            if not r["capped"] and not r["reached"] and r["returncode"] != 0:
                print(f"  {system} exited with code {r['returncode']} before the cap: its log is "
                      f"{folder / f'{system}_seed{seed}' / 'log.txt'}", flush=True)
            if system == "rlfast" and args.evaluate > 0:
                for mode in EVALUATIONS:
                    evaluate(folder / f"{system}_seed{seed}", args.evaluate, mode)
    if args.evaluate_missing:
        for seed_dir in sorted(p.parent for p in folder.glob("rlfast_seed*/row.json")):
            for mode in [m for m in EVALUATIONS if scores(seed_dir, m) is None]:
                print(f"{seed_dir.name}: {mode} evaluation", flush=True)
                evaluate(seed_dir, args.evaluate, mode)
    rows = saved_rows(folder)
    table = report(args, rows, machine)
    (folder / "table.md").write_text(table + "\n")
    (folder / "curves.json").write_text(json.dumps({"demo": args.demo, "machine": machine, "rows": rows}))
    if rows:
        plot(args, folder, rows)
    print(table)


if __name__ == "__main__":
    main(tyro.cli(Args))
