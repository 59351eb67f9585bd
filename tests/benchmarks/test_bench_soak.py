"""benchmarks/bench_soak.py: the verdict catches a leak and passes a flat run; a short real run samples."""

import os


def test_verdict_flags_growth_and_passes_flat_series(load_bench):
    soak = load_bench("bench_soak.py")
    args = soak.Args(warmup=1.0, rss_bound=64.0)
    t = [60.0 * m for m in range(31)]
    flat = soak.Series("flat", t, [500.0 + (m % 3) for m in range(31)], [9] * 31, [5] * 31, [2] * 31)
    row, ok = soak.verdict(flat, args)
    assert ok and "bound 2.0" in row
    leak = soak.Series("leak", t, [500.0 + 4 * m for m in range(31)], [9] * 31, [5] * 31, [2] * 31)
    row, ok = soak.verdict(leak, args)
    assert not ok and "+240.0/h" in row  # 4 MB a minute
    fds = soak.Series("fds", t, [500.0] * 31, [9 + (m == 30) for m in range(31)], [5] * 31, [2] * 31)
    assert not soak.verdict(fds, args)[1]
    assert soak.slope_per_hour([0.0, 3600.0], [1.0, 3.0]) == 2.0


def test_a_short_pool_soak_samples_the_process_tree(load_bench, capsys):
    soak = load_bench("bench_soak.py")
    assert soak.main(soak.Args(pool_only=True, minutes=0.25, every=3.0, warmup=0.05)) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| async pool | rounds "))
    workers = min(len(os.sched_getaffinity(0)), 16)  # the gymnasium pool's 16 envs over the cores this may use
    assert row.endswith("| yes |") and f"{workers + 1} -> {workers + 1}" in row  # and the resource tracker
