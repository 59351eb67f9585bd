"""benchmarks/bench_faults.py: each fault injected once, as promised (the benchmark injects each five times at
random moments and prints the table)."""

import random

import pytest

FAULTS = ["worker_sigkill", "worker_sigsegv", "worker_hang", "cpp_env_raises", "sigkill", "sigkill_dqn_replay",
          "truncated", "corrupt", "other_script", "other_env", "bad_flag", "disk_full", "disk_full_tmpfs",
          "ctrl_c_make", "ctrl_c_compile", "ctrl_c_save"]  # fmt: skip


@pytest.fixture(scope="module")
def bench(load_bench):
    """bench_faults.py, loaded once: its faults that start from a finished run copy the one it made first"""
    return load_bench("bench_faults.py")


@pytest.mark.parametrize("fault", [f for f in FAULTS if f != "other_script"])  # that one: through main, below
def test_each_fault_is_handled_as_promised(bench, tmp_path, fault):
    assert sorted(bench.FAULTS) == sorted(FAULTS)
    outcome = bench.FAULTS[fault](tmp_path, random.Random(1))
    assert outcome.ok, outcome.what


def test_the_table_and_an_unknown_fault(bench, capsys):
    assert bench.main(bench.Args(faults=("other_script",), repeats=1)) == 0
    out = capsys.readouterr().out
    assert "| other_script | 1 | error: --resume: " in out and "| 1/1 |" in out  # handled as promised, once
    with pytest.raises(SystemExit, match="unknown faults"):
        bench.main(bench.Args(faults=("no_such",), repeats=1))


def test_the_finished_run_is_made_once_and_each_folder_gets_a_copy(bench, tmp_path):
    first = bench.a_run(tmp_path / "a")
    (first / "checkpoint.pt").write_bytes(b"spoiled by a fault")
    second = bench.a_run(tmp_path / "b")
    assert first.parent == tmp_path / "a" / "runs" and second.parent == tmp_path / "b" / "runs"
    assert bench.readable(second) is None and len(bench._references) == 1
