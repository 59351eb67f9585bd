"""bench_render.py's frames table, on Pong (the training part runs real trainers: not here)."""

import re


def test_frames_table(load_bench):
    bench = load_bench("bench_render.py")
    rows = bench.frames(bench.Args(tasks=["Pong-v5"], num_envs=2, rounds=3))
    assert rows[0].startswith("| task | envs | step of all envs | render of all envs |")
    assert re.fullmatch(r"\| Pong-v5 \| 2 \| [\d.]+ ms \| [\d.]+ ms \| [\d.]+ ms \| 210x160x3 \|", rows[2]), rows[2]


def test_a_presets_steps_per_iteration(load_bench):
    bench = load_bench("bench_render.py")
    assert bench.plain_steps("configs/pong_5min.toml") == 16 * 128
