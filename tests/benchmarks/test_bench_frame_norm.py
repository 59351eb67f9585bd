"""Smoke test of benchmarks/bench_frame_norm.py: small batches, one row per batch and dtype with three positive
times (the script itself exits non-zero where the kernel's values differ from torch's), bad flags named."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = str(ROOT / "benchmarks" / "bench_frame_norm.py")


@pytest.fixture(scope="module")
def run(run_file):
    """``run(*flags)``: bench_frame_norm.py with ``flags``, to its end (forked, ``run_file``)"""
    return lambda *flags: run_file(SCRIPT, *flags)


def test_table_has_a_row_per_batch_and_dtype(run):
    proc = run("--batches", "3", "17", "--repeats", "2", "--rounds", "1")
    assert proc.returncode == 0, proc.stderr
    rows = re.findall(r"^\| (\d+) \| (float32|bfloat16) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+)x \|$",
                      proc.stdout, re.MULTILINE)  # fmt: skip
    assert [(b, d) for b, d, *_ in rows] == [("3", "float32"), ("3", "bfloat16"), ("17", "float32"), ("17", "bfloat16")]
    assert all(float(ms) > 0 for row in rows for ms in row[2:5]), proc.stdout
    assert "1 thread(s)" in proc.stdout


def test_bad_flags_are_named(run):
    proc = run("--dtypes", "float16")
    assert proc.returncode != 0 and "'float16'" in proc.stderr, proc.stderr
    proc = run("--threads", "0")
    assert proc.returncode != 0 and "threads=0" in proc.stderr, proc.stderr
