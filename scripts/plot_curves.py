"""Plots learning curves from run dirs: the mean return over seeds and its spread, against env steps and against
wall time, one curve per experiment.

    python scripts/plot_curves.py runs/                                   # every run dir in runs/, to curves.png
    python scripts/plot_curves.py runs/Pong-v5__ppo_atari__* --out pong.png --window 20
    python scripts/plot_curves.py runs/ --tag eval/episodic_return        # the --eval-every evaluations

Each run dir's TensorBoard events are read (``--tag``, by default ``charts/episodic_return``: each training
episode's return at the step it ended), smoothed as the progress line shows them (the mean of the last
``--window`` episodes), and the runs of one experiment (the run dir name without its seed and time:
``{env_id}__{exp_name}``) are put on a common grid of steps: the line is their mean, the band their min to max.
Wall time is the time of each event since the run's first, gaps over two minutes (a paused and resumed run) left
out (counted as a typical gap). Needs matplotlib.
"""

import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import tyro
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

PAUSE_S = 120.0
"""a gap this long between two events is a pause, not training"""
GRID = 200
"""points of the common grid of steps"""


@dataclass
class Args:
    run_dirs: tyro.conf.Positional[list[str]]
    """run dirs, or folders holding run dirs (runs/)"""
    out: str = "curves.png"
    """the PNG to write"""
    tag: str = "charts/episodic_return"
    """the scalar to plot (eval/episodic_return: the evaluations of --eval-every)"""
    window: int = 20
    """average each point over the last this many values of the tag (1: none)"""
    title: Optional[str] = None
    """the figure's title (default: the tag)"""


def find_runs(paths: list[str]) -> list[Path]:
    """The run dirs (folders with event files) among ``paths`` and the folders directly inside them."""
    runs = []
    for path in map(Path, paths):
        candidates = [path] if any(path.glob("events.out.tfevents.*")) else sorted(p for p in path.glob("*/"))
        runs += [p for p in candidates if any(p.glob("events.out.tfevents.*"))]
    return runs


def experiment(run_dir: Path) -> str:
    """``{env_id}__{exp_name}`` of a run dir named ``{env_id}__{exp_name}__{seed}__{time}``."""
    parts = run_dir.name.split("__")
    return "__".join(parts[:-2]) if len(parts) >= 4 else run_dir.name


def read_curve(run_dir: Path, tag: str, window: int) -> Optional[np.ndarray]:
    """``[n, 3]``: (step, wall seconds of training, mean of the last ``window`` values) at each value of ``tag``
    from the ``window``-th on; None where the run has fewer."""
    acc = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    acc.Reload()
    if tag not in acc.Tags().get("scalars", []):
        return None
    events = sorted(acc.Scalars(tag), key=lambda e: (e.wall_time, e.step))
    if len(events) < window:
        return None
    walls = np.array([e.wall_time for e in events])
    gaps = np.diff(walls, prepend=walls[0])
    typical = float(np.median(gaps[1:])) if len(gaps) > 1 else 0.0
    seconds = np.cumsum(np.where(gaps < PAUSE_S, gaps, typical))  # a pause counts as a typical gap
    values = np.array([e.value for e in events], dtype=np.float64)
    smooth = np.convolve(values, np.ones(window) / window, mode="valid")
    steps = np.array([e.step for e in events], dtype=np.float64)
    return np.stack([steps[window - 1 :], seconds[window - 1 :], smooth], axis=1)


def on_grid(curves: list[np.ndarray], column: int) -> tuple[np.ndarray, np.ndarray]:
    """The curves' smoothed values interpolated at ``GRID`` points of their ``column`` (0: steps, 1: seconds) up to
    where the shortest run ends: ``(x [GRID], values [runs, GRID])``."""
    end = min(c[-1, column] for c in curves)
    start = max(c[0, column] for c in curves)
    x = np.linspace(start, end, GRID) if end > start else np.array([end])
    return x, np.stack([np.interp(x, c[:, column], c[:, 2]) for c in curves])


def main(args: Args) -> int:
    if args.window < 1:
        raise SystemExit(f"error: --window must be >= 1, got {args.window}")
    runs = find_runs(args.run_dirs)
    if not runs:
        raise SystemExit(f"error: no run dirs with TensorBoard events in {' '.join(args.run_dirs)}")
    groups: dict[str, list[np.ndarray]] = defaultdict(list)
    for run_dir in runs:
        curve = read_curve(run_dir, args.tag, args.window)
        if curve is None:
            print(f"{run_dir}: fewer than {args.window} values of {args.tag}, left out")
        else:
            groups[experiment(run_dir)].append(curve)
    if not groups:
        raise SystemExit(f"error: no run has {args.window} values of {args.tag} yet")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, curves in sorted(groups.items()):
        for ax, column, scale in ((axes[0], 0, 1e6), (axes[1], 1, 60.0)):
            x, values = on_grid(curves, column)
            line, = ax.plot(x / scale, values.mean(0), label=f"{name} ({len(curves)} run{'s' * (len(curves) > 1)})")
            if len(curves) > 1:
                ax.fill_between(x / scale, values.min(0), values.max(0), color=line.get_color(), alpha=0.2)
        print(f"{name}: {len(curves)} run(s), final mean {np.mean([c[-1, 2] for c in curves]):.2f}")
    axes[0].set_xlabel("env steps (millions)")
    axes[1].set_xlabel("wall minutes of training")
    for ax in axes:
        ax.set_ylabel(f"{args.tag}, mean of the last {args.window}" if args.window > 1 else args.tag)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7, loc="lower right")
    fig.suptitle(args.title or f"{args.tag}: mean over runs, band from min to max", fontsize=10)
    fig.tight_layout()
    fig.savefig(args.out, dpi=80)
    plt.close(fig)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(tyro.cli(Args)))
