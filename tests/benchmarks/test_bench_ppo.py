"""Smoke tests of benchmarks/bench_ppo.py: both trainers really run (tiny budgets), the table, ratios and JSON."""

import importlib.util
import json
import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = str(ROOT / "benchmarks" / "bench_ppo.py")
TINY = ["--num-envs", "2", "--num-steps", "16", "--iterations", "1", "--no-cuda", "--torch-threads", "1"]
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def run_bench(run_file):
    """``run_bench(*args, env=ENV)``: bench_ppo.py with ``args``, to its end (forked, ``run_file``)"""
    return lambda *args, env=ENV: run_file(SCRIPT, *args, env=env)


@pytest.fixture(scope="module")
def side_by_side(run_bench, tmp_path_factory):
    """one run of rlfast, a speed option of it (channels-last) and, where EnvPool is installed, CleanRL's reference:
    ``(results, stdout)``"""
    out = tmp_path_factory.mktemp("ppo") / "ppo.json"
    cleanrl = ["cleanrl"] if importlib.util.find_spec("envpool") else []
    proc = run_bench(*TINY, "--contenders", "rlfast", *cleanrl, "rlfast+cl", "--json", str(out))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(out.read_text())["results"]["2"], proc.stdout


def test_rlfast_and_cleanrl_reference_side_by_side(side_by_side):
    pytest.importorskip("envpool")
    results, stdout = side_by_side
    assert list(results) == ["rlfast", "cleanrl", "rlfast+cl"]
    for name, r in results.items():
        assert r["sps"] > 0 and r["num_envs"] == 2, (name, r["note"])
        # The four profile sections partition the run's wall time.
        assert set(r["shares"]) == {"env", "inference", "train", "other"}
        assert sum(r["shares"].values()) == pytest.approx(100, abs=0.5), (name, r["shares"])
        assert r["shares"]["train"] > 0 and r["shares"]["env"] > 0
    table = stdout.split("Pong-v5 PPO, 2 envs x 16 steps, cpu")[1]
    assert "\nrlfast " in table and "\ncleanrl " in table and "1.00x" in table
    ratio = results["rlfast"]["sps"] / results["cleanrl"]["sps"]
    assert f"rlfast / cleanrl: {ratio:.2f}x" in stdout


def test_missing_envpool_skips_the_reference_with_a_note(run_bench, tmp_path):
    # A module named envpool that fails to import shadows the installed one.
    (tmp_path / "envpool.py").write_text("raise ImportError('no envpool here')\n")
    env = {**ENV, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = run_bench(*TINY, "--contenders", "cleanrl", env=env)
    assert proc.returncode == 0, proc.stderr
    (line,) = [t for t in proc.stdout.splitlines() if t.startswith("cleanrl ")]
    assert line.split(None, 1)[1] == "skipped: no envpool here (pip install envpool)"


def test_speed_options_are_contenders_of_their_own(side_by_side, tmp_path, load_bench):
    results, _ = side_by_side
    assert "rlfast+cl" in results and all(r["sps"] > 0 for r in results.values())
    bench_ppo = load_bench("bench_ppo.py")
    args = bench_ppo.Args()
    cmd = bench_ppo.contender_command("rlfast-lstm+cl+compile", args, 8, tmp_path)
    assert cmd[1].endswith("ppo_atari_lstm.py") and "--bf16" not in cmd
    assert cmd[-5:] == ["--recurrent", "lstm", "--no-auto-speed", "--channels-last", "--compile"]
    assert "--channels-last" not in bench_ppo.contender_command("rlfast", args, 8, tmp_path)


def test_rejects_bad_arguments(run_bench, load_bench):
    proc = run_bench("--contenders", "sb3")  # from the command line: the message, no traceback, a failed status
    assert proc.returncode != 0 and "unknown contender(s) ['sb3']" in proc.stderr and "Traceback" not in proc.stderr
    bench_ppo = load_bench("bench_ppo.py")
    with pytest.raises(SystemExit, match=re.escape("unknown contender(s) ['rlfast+turbo', 'cleanrl+cl']")):
        bench_ppo.main(bench_ppo.Args(contenders=("rlfast+turbo", "cleanrl+cl", "rlfast+cl")))
    with pytest.raises(SystemExit, match="--iterations must be >= 1"):
        bench_ppo.main(bench_ppo.Args(iterations=0))
