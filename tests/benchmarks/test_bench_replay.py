"""Smoke test of benchmarks/bench_replay.py: both buffers really fill and sample (tiny sizes), the table and ratios."""

import re

import pytest


def test_rlfast_and_sb3_side_by_side(capsys, load_bench):
    pytest.importorskip("stable_baselines3")
    bench = load_bench("bench_replay.py")
    results = bench.main(bench.Args(capacity=2000, num_envs=4, batch_sizes=[8, 64], seconds=0.05, device="cpu"))
    assert set(results) == {"rlfast", "rlfast-per", "sb3", "sb3-optimized"}
    for r in results.values():
        assert r["add"] > 0 and r[8] > 0 and r[64] > 0
    # Frames once (2000 x 7056 B) against obs + next_obs stacks (2 x 4 x 2000 x 7056 B) and one stack copy.
    assert results["rlfast"]["bytes"] < 2000 * 7056 * 1.01
    # Prioritized: the same frames and two float32 priorities a slot (the padding to whole blocks aside).
    assert 8 * 2000 <= results["rlfast-per"]["bytes"] - results["rlfast"]["bytes"] < 8 * 2100
    assert results["sb3"]["bytes"] > 7.9 * results["rlfast"]["bytes"]
    assert results["sb3-optimized"]["bytes"] > 3.9 * results["rlfast"]["bytes"]
    out = capsys.readouterr().out
    assert "sample@64/s" in out and "rlfast / sb3: memory 8.0x less" in out
    assert re.search(r"rlfast-per .*\(the fold after each add: [\d.]+ ms \(with one draw\)\)", out)


def test_unknown_contender_is_refused(load_bench):
    bench = load_bench("bench_replay.py")
    with pytest.raises(SystemExit, match="unknown contenders nope"):
        bench.main(bench.Args(contenders=["nope"]))
