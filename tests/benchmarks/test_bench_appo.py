"""Smoke test of benchmarks/bench_appo.py: every row really runs (tiny settings) and the table prints its ratios."""

import pytest


def test_all_rows_side_by_side(capsys, load_bench):
    bench = load_bench("bench_appo.py")
    rows = (*bench.Args.contenders, "appo+cl")  # a speed option reaches the trainer (a no-op for CartPole's MLP)
    results = bench.main(bench.Args(env_id="CartPole-v1", num_envs=8, batch_size=64, steps=2048, cuda=False,
                                    torch_threads=1, contenders=rows))  # fmt: skip
    assert list(results) == ["env-only", "sampler-only", "appo", "ppo", "appo+cl"]
    assert all(v > 0 for v in results.values()), results
    assert results["env-only"] > results["sampler-only"]  # acting and storing cost something
    out = capsys.readouterr().out
    assert "CartPole-v1, 8 envs (4 per recv), batch 64, 2,048 steps" in out and "100.0%" in out


def test_unknown_row_is_refused(load_bench):
    bench = load_bench("bench_appo.py")
    with pytest.raises(SystemExit, match=r"unknown contender\(s\) \['nope'\]"):
        bench.main(bench.Args(contenders=("nope",)))


def test_recurrent_rows_run_the_trainers_with_an_lstm(load_bench):
    bench = load_bench("bench_appo.py")
    results = bench.main(bench.Args(env_id="Breakout-v5", num_envs=4, batch_size=128, steps=256, cuda=False,
                                    torch_threads=1, contenders=("appo-lstm", "ppo-gru")))  # fmt: skip
    assert list(results) == ["appo-lstm", "ppo-gru"] and all(v > 0 for v in results.values()), results
    cartpole = bench.main(bench.Args(env_id="CartPole-v1", num_envs=4, batch_size=64, steps=128, cuda=False,
                                     torch_threads=1, contenders=("appo-lstm",)))  # fmt: skip
    assert cartpole == {"appo-lstm": 0.0}  # refused: the recurrent core sits on the CNN (a note says why)
