"""Smoke test of benchmarks/bench_bf16_rounding.py: a small batch, the table's six rows, the rounded path
nearer the autocast than plain float32."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_table_has_every_path_and_layout(run_file):
    proc = run_file(ROOT / "benchmarks" / "bench_bf16_rounding.py", "--batch", "16", "--repeats", "1")
    assert proc.returncode == 0, proc.stderr
    rows = re.findall(r"^\| (autocast \(vs the other layout\)|rounded|float32) \| (NCHW|channels-last) \| ([\d.]+)% \| "
                      r"([\d.e+-]+) \| ([\d.e+-]+) \| ([\d.]+) \|$", proc.stdout, re.MULTILINE)  # fmt: skip
    assert len(rows) == 6, proc.stdout
    share = {(path.split()[0], layout): float(differ) for path, layout, differ, *_ in rows}
    for layout in ("NCHW", "channels-last"):
        assert share["rounded", layout] < share["float32", layout], proc.stdout  # the rounding is what brings it near
    assert all(float(ms) > 0 for *_, ms in rows)
