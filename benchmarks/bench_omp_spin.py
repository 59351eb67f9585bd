"""How long torch's idle OpenMP threads spin, against a trainer's profile: the pool and torch share the cores.

torch's CPU build runs its ops on GNU OpenMP (libgomp). After each parallel op, libgomp's worker threads
busy-wait for the next one (``GOMP_SPINCOUNT``, 300,000 polls by default when ``OMP_WAIT_POLICY`` is unset)
before they sleep. In a trainer the next thing after the policy's forward is ``pool.send``: the pool's C++
threads then step the envs on cores where torch's workers are still spinning. On 2 cores the Pong rollout
measured twice as slow as the pool alone. rlfast sets ``GOMP_SPINCOUNT`` when it is imported before torch
(``rlfast/_omp.py``); this benchmark runs one trainer command under each setting, interleaved, and prints
the profile's sections (median ms per iteration over the rounds) and steps/s side by side.

    python benchmarks/bench_omp_spin.py                                  # Pong, configs/pong_5min.toml
    python benchmarks/bench_omp_spin.py --rounds 3 -- scripts/ppo_continuous.py --config configs/ant_5min.toml \\
        --total-timesteps 204800

Each setting is a fresh process (libgomp reads the variables once, when torch loads it), so the variables
reach it from the environment: ``libgomp default`` unsets both, which is torch's behaviour without rlfast.
"""

import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import tyro

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = {  # label -> the environment's OpenMP variables (None: unset)
    "libgomp default": {"GOMP_SPINCOUNT": None, "OMP_WAIT_POLICY": None},
    "spin 30000": {"GOMP_SPINCOUNT": "30000", "OMP_WAIT_POLICY": None},
    "spin 3000": {"GOMP_SPINCOUNT": "3000", "OMP_WAIT_POLICY": None},
    "spin 300": {"GOMP_SPINCOUNT": "300", "OMP_WAIT_POLICY": None},
    "passive": {"GOMP_SPINCOUNT": None, "OMP_WAIT_POLICY": "PASSIVE"},
}
DEFAULT_COMMAND = ["scripts/ppo_atari.py", "--config", "configs/pong_5min.toml", "--total-timesteps", "61440"]
ROW = re.compile(r"^(\w+)\s+[\d.]+\s+[\d.]+%\s+([\d.]+)\s+\d+$")


@dataclass
class Args:
    settings: tuple[str, ...] = tuple(SETTINGS)
    """which of the settings to run, in this order"""
    rounds: int = 2
    """runs of each setting, interleaved (round 1 of every setting, then round 2, ...)"""


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def profile(command: list[str], variables: dict, workdir: str) -> dict[str, float]:
    """ms per iteration of each section of one trainer run's profile table"""
    env = dict(os.environ)
    for name, value in variables.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    env["RLFAST_OMP_DEFAULTS"] = "0"  # rlfast leaves the variables as this process gives them
    command = [str(ROOT / a) if (ROOT / a).is_file() else a for a in command]  # runs in a temp folder
    out = subprocess.run([sys.executable, *command, "--save-minutes", "0"],
                         cwd=workdir, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    rows = {m.group(1): float(m.group(2)) for m in map(ROW.match, out.stdout.splitlines()) if m}
    if "total" not in rows:
        raise SystemExit(f"no profile table in the output of {' '.join(command)}:\n{out.stdout[-2000:]}")
    return rows


def main(argv: list[str]) -> None:
    split = argv.index("--") if "--" in argv else len(argv)
    args = tyro.cli(Args, args=argv[:split], description=__doc__)
    command = argv[split + 1 :] or DEFAULT_COMMAND  # the trainer (from the checkout's root) and its flags
    unknown = [s for s in args.settings if s not in SETTINGS]
    if unknown:
        raise SystemExit(f"unknown --settings {unknown}; choose from {list(SETTINGS)}")
    results: dict[str, list[dict]] = {s: [] for s in args.settings}
    with tempfile.TemporaryDirectory() as workdir:
        for round_ in range(args.rounds):
            for setting in args.settings:
                rows = profile(command, SETTINGS[setting], workdir)
                results[setting].append(rows)
                print(f"round {round_ + 1} {setting:16s} total {rows['total']:8.1f} ms/iter", flush=True)
    sections = [s for s in results[args.settings[0]][0] if s != "total"] + ["total"]
    print(f"\n{' '.join(command)}: median ms per iteration over {args.rounds} rounds; "
          f"{os.cpu_count()} cores, {cpu_model()}")
    header = f"{'setting':18s}" + "".join(f"{s:>11s}" for s in sections) + f"{'vs default':>12s}"
    print(header)
    print("-" * len(header))
    base = None
    for setting in args.settings:
        med = {s: statistics.median(r[s] for r in results[setting]) for s in sections}
        base = base or med["total"]
        print(f"{setting:18s}" + "".join(f"{med[s]:11.1f}" for s in sections) + f"{base / med['total']:11.2f}x")


if __name__ == "__main__":
    main(sys.argv[1:])
