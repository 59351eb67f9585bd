"""Population-based training at work: one APPO population trained twice from the same start, with PBT and without.

Both runs are ``scripts/appo.py --pbt-population N`` with the same seed, so the members start with the same
hyperparameters (member 0 the flags', the others mutated copies, ``--pbt-set`` on top: by default member 2 gets a
learning rate of 1e-7, with which it cannot learn). The first run takes PBT steps every ``--period`` env steps of a
member; the second never does (its period is longer than the run), which is what N separate runs would give. The
broken member should take a better one's weights and learning rate in the first run, and stay where it started in
the second.

    python benchmarks/bench_pbt.py                                           # CartPole, 4 members, ~1-2 min
    python benchmarks/bench_pbt.py --config configs/cartpole_appo.toml --population 4 --steps 600000

Writes ``OUT/`` (default ``results/pbt_cartpole``): ``runs/`` (ignored by git), ``log_pbt.txt`` and ``log_nopbt.txt``
(the runs' output), ``table.md`` (per member: its start and final learning rate, its final objective, in both runs;
the CPU) and ``curves.png`` (each member's objective, the mean return of its last --objective-episodes episodes,
against its env steps, both runs side by side).
"""

import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import tyro
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from bench_demo import cpu

ROOT = Path(__file__).resolve().parents[1]


@dataclass
class Args:
    config: str = "configs/cartpole_appo.toml"
    """appo.py's preset"""
    population: int = 4
    steps: int = 600_000
    """env steps of the whole population (each member: steps / population)"""
    start: int = 20_000
    """--pbt-start: env steps of a member before its first PBT step"""
    period: int = 20_000
    """--pbt-period"""
    objective_episodes: int = 20
    pbt_set: tuple[str, ...] = ("2:learning_rate=1e-7",)
    seed: int = 1
    extra: list[str] = field(default_factory=list)
    """more appo.py flags, for both runs"""
    out: str = "results/pbt_cartpole"


def scalars(run_dir: Path, tag: str) -> list[tuple[int, float]]:
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)] if tag in acc.Tags()["scalars"] else []


def train(args: Args, out: Path, name: str, period: int) -> Path:
    runs = out / "runs" / name
    cmd = [sys.executable, str(ROOT / "scripts" / "appo.py"), "--config", str(ROOT / args.config), "--seed",
           str(args.seed), "--pbt-population", str(args.population), "--pbt-start", str(args.start), "--pbt-period",
           str(period), "--pbt-objective-episodes", str(args.objective_episodes), "--total-timesteps",
           str(args.steps), "--runs-dir", str(runs), *(["--pbt-set", *args.pbt_set] if args.pbt_set else []),
           *args.extra]  # fmt: skip
    shown = ["python", *(str(Path(c).relative_to(ROOT)) if c.startswith(str(ROOT)) else c for c in cmd[1:])]
    shown = [c.replace(str(out), "OUT") for c in shown]
    print("$ " + " ".join(shown), flush=True)
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    log = proc.stdout.replace(str(out), "OUT") + proc.stderr
    (out / f"log_{name}.txt").write_text("$ " + " ".join(shown) + "\n" + log)
    if proc.returncode != 0:
        raise SystemExit(f"error: the {name} run failed:\n{proc.stderr[-2000:]}")
    (run_dir,) = runs.iterdir()
    return run_dir


def member_curves(run_dir: Path, population: int) -> dict[int, dict]:
    """Per member: its objective and learning rate against its own env steps (the run's steps / population)."""
    curves = {}
    for k in range(population):
        objective = scalars(run_dir, f"pbt/policy_{k}/objective")
        rate = scalars(run_dir, f"pbt/policy_{k}/learning_rate")
        curves[k] = {"steps": [s // population for s, _ in objective], "objective": [v for _, v in objective],
                     "lr_start": rate[0][1], "lr_end": rate[-1][1]}  # fmt: skip
    return curves


def report(args: Args, runs: dict[str, dict], exchanges: int) -> str:
    lines = [f"APPO population of {args.population} ({args.config}, seed {args.seed}, {args.steps:,} env steps in all, "
             f"--pbt-set {' '.join(args.pbt_set) or '-'}); CPU: {cpu()}", "",
             "| member | learning rate at start | with PBT: final rate | with PBT: final objective "
             "| without PBT: final rate | without PBT: final objective |", "|---|---|---|---|---|---|"]  # fmt: skip
    for k in range(args.population):
        on, off = runs["pbt"][k], runs["nopbt"][k]
        lines.append(f"| {k} | {on['lr_start']:.3g} | {on['lr_end']:.3g} | {on['objective'][-1]:.1f} | "
                     f"{off['lr_end']:.3g} | {off['objective'][-1]:.1f} |")  # fmt: skip
    lines += ["", f"With PBT: {exchanges} exchanges of weights (every {args.period:,} env steps of a member after "
              f"{args.start:,}); the objective is the mean return of a member's last {args.objective_episodes} "
              "episodes."]  # fmt: skip
    return "\n".join(lines) + "\n"


def plot(args: Args, runs: dict[str, dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    for ax, (name, title) in zip(axes, (("pbt", "with PBT"), ("nopbt", "without PBT (same start)"))):
        for k, curve in runs[name].items():
            label = f"member {k} (lr {curve['lr_start']:.2g} -> {curve['lr_end']:.2g})"
            ax.plot(curve["steps"], curve["objective"], label=label)
        ax.set_title(title)
        ax.set_xlabel("env steps of the member")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_ylabel(f"mean return, last {args.objective_episodes} episodes")
    fig.suptitle(f"APPO population of {args.population} on {Path(args.config).stem}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(args: Args) -> None:
    out = ROOT / args.out
    out.mkdir(parents=True, exist_ok=True)
    runs, exchanges = {}, 0
    for name, period in (("pbt", args.period), ("nopbt", 10 * args.steps)):
        run_dir = train(args, out, name, period)
        runs[name] = member_curves(run_dir, args.population)
        if name == "pbt":
            exchanges = int(scalars(run_dir, "pbt/replacements")[-1][1])
    table = report(args, runs, exchanges)
    print(table)
    (out / "table.md").write_text(table)
    (out / "curves.json").write_text(json.dumps(runs))
    plot(args, runs, out / "curves.png")
    print(f"wrote {args.out}/table.md, curves.json, curves.png")


if __name__ == "__main__":
    main(tyro.cli(Args))
