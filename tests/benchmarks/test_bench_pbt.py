"""bench_pbt.py on a small budget: both runs start alike, only the PBT one exchanges weights, and the table, curves
and logs are written (the figure in docs is the same command at its defaults)."""

import json

import pytest

pytestmark = pytest.mark.run_defaults(timeout=240)


def test_the_broken_member_recovers_only_with_pbt(load_bench, tmp_path):
    bench = load_bench("bench_pbt.py")
    args = bench.Args(population=2, steps=2 * 24 * 1024, start=12_288, period=12_288, out=str(tmp_path / "out"),
                      pbt_set=("1:learning_rate=1e-7",), extra=["--num-threads", "1", "--torch-threads", "1"])
    bench.main(args)
    out = tmp_path / "out"
    runs = json.loads((out / "curves.json").read_text())
    on, off = runs["pbt"], runs["nopbt"]
    assert on["0"]["lr_start"] == off["0"]["lr_start"] == pytest.approx(1e-3)  # the same start
    assert on["1"]["lr_start"] == off["1"]["lr_start"] == pytest.approx(1e-7)
    assert off["1"]["lr_end"] == pytest.approx(1e-7) and on["1"]["lr_end"] > 1e-4  # recovered only with PBT
    assert on["1"]["steps"][-1] <= 24 * 1024 and on["1"]["objective"][-1] > 1.5 * off["1"]["objective"][-1]
    table = (out / "table.md").read_text()
    assert "| 1 | 1e-07 |" in table and "CPU: " in table and "exchanges of weights" in table
    assert (out / "curves.png").stat().st_size > 0
    assert "--pbt-period 491520" in (out / "log_nopbt.txt").read_text()  # never due: 10 x the run
    assert str(tmp_path) not in (out / "log_pbt.txt").read_text()
