"""Smoke test of benchmarks/bench_dqn.py: every contender really runs (tiny settings), phases and memory are read
back from each run, the table and its ratios, and bad settings are refused."""

import pytest


def test_all_contenders_side_by_side(capsys, load_bench):
    pytest.importorskip("envpool")
    pytest.importorskip("stable_baselines3")
    bench = load_bench("bench_dqn.py")
    args = bench.Args(steps=1024, learning_starts=512, settings=("4x32",), iterations=4, replay_ratio=1.0,
                      cuda=False, torch_threads=1)  # fmt: skip
    (results,) = bench.main(args).values()
    assert list(results) == ["rlfast", "cleanrl", "env-only", "envpool-only"]
    for name, r in results.items():
        assert r.total_s > 0 and r.play_fps > 0 and r.train_fps > 0, (name, r)
        assert sum(r.shares.values()) == pytest.approx(100.0), (name, r.shares)
    for name in ("rlfast", "cleanrl"):  # trained after learning starts; the floors never did
        assert results[name].shares["train"] > 0 and results[name].shares["inference"] > 0, name
    assert results["env-only"].shares["train"] == 0 and results["env-only"].shares["env"] > 90
    # 1,024 transitions: frames once (1024 x 7056 B) and 15 bytes of the rest each; SB3 holds 4-frame stacks.
    assert results["rlfast"].memory == "7.24 MB" and results["cleanrl"].memory == "28.92 MB"
    out = capsys.readouterr().out
    assert "SpaceInvaders-v5 DQN, 4 envs, batch 32, 1,024 steps (learning from 512)" in out
    assert "vs cleanrl" in out and "1.00x" in out


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"settings": ("512-2048",)}, "--settings '512-2048' must be ENVSxBATCH"),
        ({"contenders": ("nope",)}, r"unknown contender\(s\) \['nope'\]"),
        ({"learning_starts": 500_000}, r"--learning-starts 500,000 must be in \[batch 32, --steps 500,000\)"),
    ],
)
def test_bad_arguments_are_refused(kwargs, message, load_bench):
    bench = load_bench("bench_dqn.py")
    with pytest.raises(SystemExit, match=message):
        bench.main(bench.Args(**kwargs))
