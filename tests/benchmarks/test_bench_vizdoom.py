"""Smoke test of benchmarks/bench_vizdoom.py: tiny budgets, real measurements, one table with the shares of the
single-env limit, and Sample Factory's rows explained when its Python is missing. Skipped without vizdoom."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("vizdoom", reason="the vizdoom extra: pip install 'rlfast[vizdoom]'")

ROOT = Path(__file__).resolve().parents[2]


def test_basic_table_with_shares_and_the_reason_sample_factory_did_not_run(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_vizdoom.py"), "--scenarios", "DoomBasic-v0", "--num-envs",
         "2", "--seconds", "0.3", "--warmup", "0.1", "--contenders", "single", "rlfast", "rlfast-async", "gym-async",
         "sf-sampler", "--sf-python", str(tmp_path / "no-python"), "--wait-quiet", "0", "--retries", "0"],
        check=False, capture_output=True, text=True, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert re.search(r"^machine: .+, \d+ cores, flags: ", out, re.M), out
    assert re.search(r"DoomBasic-v0, \d+ cores; single-env limit: [\d,]+\*? steps/s x \d+ cores = [\d,]+", out), out
    for row in ("rlfast", "rlfast-async", "gym-async"):  # * marks a run that other work on the machine disturbed
        assert re.search(rf"^\| {row} \| [\d,]+\*? \([\d,]+\) \| \d+% \|$", out, re.M), row
    assert re.search(r"^  DoomBasic-v0 rlfast N=2: [\d,]+ steps/s \(other work: \d+\.\d\d cores", out, re.M), out
    assert "| sf-sampler |" not in out
    assert f"Sample Factory's rows: not run, no Python at --sf-python {tmp_path / 'no-python'}" in out
