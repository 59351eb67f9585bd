"""Smoke tests of benchmarks/bench_envs.py: tiny budgets, real measurements, tables, JSON and the plot out."""

import faulthandler
import importlib.util
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = str(ROOT / "benchmarks" / "bench_envs.py")


@pytest.fixture(scope="module")
def run_bench(run_file):
    """``run_bench(*args)``: bench_envs.py with ``args``, to its end (forked, ``run_file``), checked to exit 0"""

    def run(*args: str, env=None) -> subprocess.CompletedProcess:
        proc = run_file(SCRIPT, *args, timeout=180, env=env)
        assert proc.returncode == 0, proc.stderr
        return proc

    return run


def test_classic_control_table_and_json(run_bench, tmp_path):
    out = tmp_path / "bench.json"
    proc = run_bench(
        "--tasks", "CartPole-v1", "Pendulum-v1", "--num-envs", "4", "--seconds", "0.2", "--warmup", "0.05",
        "--contenders", "rlfast-sync", "rlfast-async", "gym-sync", "--json", str(out),
    )  # fmt: skip
    assert "rlfast-sync / gym-sync:" in proc.stdout
    data = json.loads(out.read_text())
    for task in ("CartPole-v1", "Pendulum-v1"):
        results = data["results"][task]
        assert set(results) == {"rlfast-sync", "rlfast-async", "gym-sync"}
        for name, r in results.items():
            assert r["steps"] > 0 and r["steps_per_s"] > 0 and r["rate"] == r["steps_per_s"], (task, name)
        assert results["rlfast-sync"]["batch_size"] == 4 and results["rlfast-async"]["batch_size"] == 2
        # Every rlfast-sync call steps all 4 envs and every async call 2: counts are multiples.
        assert results["rlfast-sync"]["steps"] % 4 == 0 and results["rlfast-async"]["steps"] % 2 == 0


def test_atari_mujoco_and_classic_in_one_run_with_plot(run_bench, tmp_path):
    pytest.importorskip("matplotlib")  # .ci/run installs it (the bench extra)
    out, png = tmp_path / "bench.json", tmp_path / "sweep.png"
    # EnvPool rows are left out for speed; gym-async on Atari needs opencv (AtariPreprocessing).
    contenders = ["raw-1core", "raw-limit", "rlfast-sync", "rlfast-async", "rlfast-async-wir", "ale-async"]
    contenders += ["gym-sync", "rlfast-n1", "rlfast-n1-wir"]
    contenders += ["gym-async"] if importlib.util.find_spec("cv2") else []
    proc = run_bench(
        "--tasks", "Pong-v5", "Ant-v5", "CartPole-v1", "--num-envs", "4", "--num-threads", "2",
        "--seconds", "0.2", "--warmup", "0.1", "--contenders", *contenders,
        "--plot", str(png), "--threads-sweep", "1", "2", "--json", str(out),
    )  # fmt: skip
    data = json.loads(out.read_text())
    atari, mujoco, classic = (data["results"][t] for t in ("Pong-v5", "Ant-v5", "CartPole-v1"))
    # Each family runs only the contenders that apply to it.
    assert set(atari) == set(contenders) - {"gym-sync"}
    assert set(mujoco) == set(contenders) - {"ale-async", "rlfast-n1", "rlfast-n1-wir"}
    assert set(classic) == set(contenders) - {"raw-1core", "raw-limit", "ale-async", "rlfast-n1", "rlfast-n1-wir"}
    for task, results in data["results"].items():
        for name, r in results.items():
            assert r["steps"] > 0 and r["rate"] > 0, (task, name, r["note"])
    # Atari counts emulator frames (4 per env step); MuJoCo and classic control env steps.
    assert all(r["rate"] == 4 * r["steps_per_s"] for r in atari.values())
    assert all(r["rate"] == r["steps_per_s"] for r in mujoco.values())
    assert atari["raw-limit"]["threads"] == 2 and atari["rlfast-n1"]["num_envs"] == 1
    assert atari["rlfast-n1-wir"]["num_envs"] == 1 and mujoco["rlfast-async-wir"]["threads"] == 2
    for task, unit in (("Pong-v5", "frames/s"), ("Ant-v5", "steps/s")):
        table = proc.stdout.split(f"\n{task}: ")[1].split("\n\n")[0]
        assert unit in table and "of limit" in table and "rlfast-async: " in table and "% of the limit" in table
        assert "rlfast-async-wir: " in table
        for name in data["results"][task]:
            assert f"\n{name} " in table
    assert "rlfast-n1" in proc.stdout and "rlfast-sync / gym-sync:" in proc.stdout
    # The sweep: raw-limit and rlfast-async[-wir] at 1 and 2 threads (envpool-async was not chosen).
    for task in ("Pong-v5", "Ant-v5"):
        sweep = data["sweep"][task]
        assert set(sweep) == {"raw-limit", "rlfast-async", "rlfast-async-wir"}
        assert all([t for t, _ in points] == [1, 2] and all(v > 0 for _, v in points) for points in sweep.values())
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_missing_peer_is_skipped_with_a_note(run_bench, tmp_path):
    # A module named envpool that fails to import shadows the installed one.
    (tmp_path / "envpool.py").write_text("raise ImportError('no envpool here')\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    proc = run_bench("--seconds", "0.1", "--warmup", "0", "--contenders", "envpool-sync", "rlfast-sync", env=env)
    assert re.search(r"\nenvpool-sync +skipped: no envpool here\n", proc.stdout), proc.stdout
    assert re.search(r"\nrlfast-sync +8 +8 ", proc.stdout), proc.stdout


def test_rejects_unknown_contender_and_task(run_file):
    proc = run_file(SCRIPT, "--contenders", "nope", timeout=60)
    assert proc.returncode != 0 and "unknown contender" in proc.stderr
    proc = run_file(SCRIPT, "--tasks", "CartPol-v1", timeout=60)
    assert proc.returncode != 0 and "did you mean 'CartPole-v1'" in proc.stderr


def test_startup_rows(run_bench, tmp_path):
    out = tmp_path / "startup.json"
    proc = run_bench("--tasks", "Pong-v5", "--startup", "4", "--contenders", "--json", str(out))
    assert "Pong-v5: start-up of 4 envs" in proc.stdout
    startup = json.loads(out.read_text())["startup"]["Pong-v5"]
    assert startup["rlfast"]["make_s"] > 0 and startup["rlfast"]["reset_s"] > 0
    # The peers are optional; when installed they get a row of their own.
    for peer, module in (("envpool", "envpool"), ("ale-vector", "ale_py")):
        if importlib.util.find_spec(module):
            assert startup[peer]["make_s"] > 0, peer
    assert json.loads(out.read_text())["results"]["Pong-v5"] == {}  # --contenders with none: start-up only


def test_a_crashed_contender_is_a_failed_row_at_once(load_bench):
    """A contender's process that dies (a segfault, as rlfast's did on the GPU machine before its link fix)
    fails its row within seconds instead of holding the benchmark for the whole timeout."""
    bench = load_bench("bench_envs.py")
    t0 = time.monotonic()
    with pytest.raises(bench.ChildDied, match="exited with -11"):
        bench.run_in_child(lambda: (faulthandler.disable(), os.kill(os.getpid(), signal.SIGSEGV)), timeout=300)
    assert time.monotonic() - t0 < 30
    assert bench.run_in_child(lambda: 7, timeout=60) == 7
