"""benchmarks/bench_faults.py: each fault injected once, as promised (the benchmark injects each five times at
random moments and prints the table)."""

import random

import pytest

FAULTS = ["worker_sigkill", "worker_sigsegv", "worker_hang", "cpp_env_raises", "sigkill", "sigkill_dqn_replay",
          "truncated", "corrupt", "other_script", "other_env", "bad_flag", "disk_full", "disk_full_tmpfs",
          "ctrl_c_make", "ctrl_c_compile", "ctrl_c_save"]  # fmt: skip


@pytest.mark.parametrize("fault", [f for f in FAULTS if f != "other_script"])  # that one: through main, below
def test_each_fault_is_handled_as_promised(load_bench, tmp_path, fault):
    bench = load_bench("bench_faults.py")
    assert sorted(bench.FAULTS) == sorted(FAULTS)
    outcome = bench.FAULTS[fault](tmp_path, random.Random(1))
    assert outcome.ok, outcome.what


def test_the_table_and_an_unknown_fault(load_bench, capsys):
    bench = load_bench("bench_faults.py")
    assert bench.main(bench.Args(faults=("other_script",), repeats=1)) == 0
    out = capsys.readouterr().out
    assert "| other_script | 1 | error: --resume: " in out and "| 1/1 |" in out  # handled as promised, once
    with pytest.raises(SystemExit, match="unknown faults"):
        bench.main(bench.Args(faults=("no_such",), repeats=1))
