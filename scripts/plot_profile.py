"""Plots where a run's time went: a stacked bar chart of its ``perf/*`` sections over training.

    python scripts/plot_profile.py runs/<run>                 # writes runs/<run>/profile.png
    python scripts/plot_profile.py runs/<run> --out p.png --bars 20

Reads the run dir's tensorboard event files (``perf/<section>``: seconds per iteration, as
``rlfast.algos.profiling.SectionTimer`` logs them), groups the iterations into ``--bars``
consecutive bins and stacks the mean milliseconds per iteration of every section. The
title gives each section's share of the whole run. Needs matplotlib.
"""

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import tyro
from tensorboard.backend.event_processing import event_accumulator

ORDER = ("env", "inference", "train", "eval", "all_reduce", "other")


@dataclass
class Args:
    run_dir: tyro.conf.Positional[str]
    """a run dir holding tensorboard event files (runs/<run>)"""
    out: Optional[str] = None
    """the PNG to write (default: <run_dir>/profile.png)"""
    bars: int = 30
    """at most this many bars (consecutive iterations are averaged into one bar)"""


def read_perf(run_dir: str) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """``(global_steps [I], {section: seconds per iteration [I]})`` from the event files.

    Resumed runs append events to the same dir; a step logged twice keeps its last value.
    """
    acc = event_accumulator.EventAccumulator(run_dir, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    tags = [t for t in acc.Tags()["scalars"] if t.startswith("perf/")]
    if not tags:
        raise SystemExit(f"error: no perf/* scalars in {run_dir} (is it a run dir of an rlfast trainer?)")
    series = {t[len("perf/") :]: {e.step: e.value for e in acc.Scalars(t)} for t in tags}
    steps = np.array(sorted(set().union(*(s.keys() for s in series.values()))))
    names = [n for n in ORDER if n in series] + sorted(n for n in series if n not in ORDER)
    return steps, {n: np.array([series[n].get(int(s), 0.0) for s in steps]) for n in names}


def plot(steps: np.ndarray, sections: dict[str, np.ndarray], out: Path, bars: int, title: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise SystemExit("error: plot_profile.py needs matplotlib: pip install matplotlib") from None

    bins = np.array_split(np.arange(len(steps)), min(bars, len(steps)))
    right = np.array([steps[b[-1]] for b in bins], dtype=float)
    left = np.concatenate([[0.0], right[:-1]])
    totals = {n: v.sum() for n, v in sections.items()}
    wall = sum(totals.values())
    fig, ax = plt.subplots(figsize=(10, 5))
    bottom = np.zeros(len(bins))
    for name, values in sections.items():
        ms = np.array([1000 * values[b].mean() for b in bins])
        label = f"{name} ({100 * totals[name] / wall:.0f}%)"
        ax.bar(left, ms, width=0.9 * (right - left), bottom=bottom, align="edge", label=label)
        bottom += ms
    ax.set_xlabel("global step")
    ax.set_ylabel("ms per iteration")
    ax.set_title(f"{title}: {wall:.1f} s over {len(steps)} iterations")
    ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)


def main(args: Args) -> int:
    run_dir = Path(args.run_dir)
    if not run_dir.is_dir():
        raise SystemExit(f"error: {run_dir} is not a directory")
    steps, sections = read_perf(str(run_dir))
    out = Path(args.out) if args.out else run_dir / "profile.png"
    plot(steps, sections, out, max(args.bars, 1), run_dir.name)
    total = sum(v.sum() for v in sections.values())
    split = ", ".join(f"{n} {100 * v.sum() / total:.1f}%" for n, v in sections.items())
    print(f"{out}: {split}")
    return 0


if __name__ == "__main__":
    sys.exit(main(tyro.cli(Args)))
