"""Smoke test of scripts/bench_envs.py: a tiny budget, real measurements, a table and JSON out."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_bench_envs_prints_table_and_writes_json(tmp_path):
    out = tmp_path / "bench.json"
    cmd = [
        sys.executable, str(ROOT / "scripts" / "bench_envs.py"),
        "--tasks", "CartPole-v1", "Pendulum-v1", "--num-envs", "4", "--seconds", "0.2", "--warmup", "0.05",
        "--contenders", "rlfast-sync", "rlfast-async", "gym-sync", "--json", str(out),
    ]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "rlfast-sync / gym-sync:" in proc.stdout
    data = json.loads(out.read_text())
    for task in ("CartPole-v1", "Pendulum-v1"):
        results = data["results"][task]
        assert set(results) == {"rlfast-sync", "rlfast-async", "gym-sync"}
        for name, r in results.items():
            assert r["steps"] > 0 and r["steps_per_s"] > 0, (task, name)
        assert results["rlfast-sync"]["batch_size"] == 4 and results["rlfast-async"]["batch_size"] == 2
        # Every rlfast-sync call steps all 4 envs and every async call 2: counts are multiples.
        assert results["rlfast-sync"]["steps"] % 4 == 0 and results["rlfast-async"]["steps"] % 2 == 0


def test_bench_envs_rejects_unknown_contender_and_task():
    script = str(ROOT / "scripts" / "bench_envs.py")
    proc = subprocess.run([sys.executable, script, "--contenders", "nope"], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "unknown contender" in proc.stderr
    proc = subprocess.run([sys.executable, script, "--tasks", "CartPol-v1"], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "did you mean 'CartPole-v1'" in proc.stderr
