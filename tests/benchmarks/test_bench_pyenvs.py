"""Smoke test of benchmarks/bench_pyenvs.py: tiny budgets, real measurements, the table with its ratios."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "bench_pyenvs.py"
OVERHEAD = ROOT / "benchmarks" / "bench_pyenv_overhead.py"


def test_cartpole_table_with_every_ratio(run_file):
    proc = run_file(SCRIPT, "--tasks", "CartPole-v1", "--num-envs", "2", "4", "--seconds", "0.2", "--warmup", "0.05",
                    "--contenders", "single", "loop-per-core", "rlfast", "rlfast-async", "gym-async")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert re.search(r"CartPole-v1 \(one env alone in one process: [\d,]+ steps/s\)", out)
    for row in ("loop-per-core", "rlfast", "rlfast-async", "gym-async"):  # a measured rate for each N
        assert re.search(rf"^\| {row} \| [\d,]+ \| [\d,]+ \|$", out, re.M), row
    for row in ("rlfast / gym-async", "rlfast-async / gym-async"):
        assert re.search(rf"^\| {row} \| [\d.]+x \| [\d.]+x \|$", out, re.M), row
    for row in ("rlfast / (single x cores used)", "rlfast / loop-per-core", "loop-per-core / (single x cores used)"):
        assert re.search(rf"^\| {re.escape(row)} \| \d+% \| \d+% \|$", out, re.M), row


def test_pool_overhead_is_measured_per_env_step(run_file):
    # 1 s: the workers' CPU time is counted in the kernel's 10 ms ticks, and a 0.3 s sample beside a loaded machine's
    # other work once gave them none (0.00 us a step)
    proc = run_file(OVERHEAD, "--num-envs", "4", "--num-workers", "2", "--seconds", "1.0", "--warmup", "0.1",
                    timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    found = re.search(r"N = 4, batch 4, 2 worker\(s\): ([\d,]+) steps/s; CPU per env step: main process ([\d.]+) us, "
                      r"workers ([\d.]+) us", proc.stdout)  # fmt: skip
    assert found, proc.stdout
    assert int(found.group(1).replace(",", "")) > 0 and float(found.group(3)) > 0  # the workers' CPU was counted


def test_a_real_envs_time_is_split_between_the_pool_and_the_env(run_file):
    proc = run_file(OVERHEAD, "--task", "CartPole-v1", "--num-envs", "4", "--num-workers", "2", "--batch-size", "2",
                    "--seconds", "1.0", "--warmup", "0.1", timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    found = re.search(r"CartPole-v1, N = 4, batch 2, 2 worker\(s\): [\d,]+ steps/s; .*; workers busy ([\d.]+) / "
                      r"([\d.]+) of a core; env.step ([\d.]+) us, reset (\d+) us in the workers, ([\d.]+) us / "
                      r"(\d+) us alone \((\d+) steps a reset\)", proc.stdout)  # fmt: skip
    assert found, proc.stdout
    busy, step_in, step_alone = float(found.group(1)), float(found.group(3)), float(found.group(5))
    assert 0 < busy <= 1.5 and step_in > 0 and step_alone > 0 and int(found.group(7)) >= 8  # CartPole: 8+ steps a game
