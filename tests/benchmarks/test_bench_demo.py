"""bench_demo.py: the timing from the command's start, the 20-episode window, a capped run and the table (the
demos themselves run for minutes: benchmarks/, not here; rl_games is not installed here)."""

import json

import pytest

pytestmark = pytest.mark.run_defaults(timeout=180)


def test_the_window_starts_at_its_20th_episode(load_bench):
    bench = load_bench("bench_demo.py")
    points = [(float(i), 100 * i, float(i)) for i in range(25)]
    curve = bench.windowed(points)
    assert len(curve) == 6 and curve[0] == (19.0, 1900, sum(range(20)) / 20) and curve[-1][2] == sum(range(5, 25)) / 20


def test_a_capped_run_is_stopped_and_counted_as_not_reached(load_bench, tmp_path):
    bench = load_bench("bench_demo.py")
    preset = tmp_path / "tiny.toml"
    preset.write_text('num_envs = 2\nnum_steps = 16\ntotal_timesteps = 100000000\ntorch_threads = 1\n')
    args = bench.Args(demo="pong", seeds=(3,), out=str(tmp_path / "out"), cap_minutes=0.3, preset=str(preset))
    bench.main(args)
    folder = tmp_path / "out" / "pong"
    (row,) = json.loads((folder / "curves.json").read_text())["rows"]
    assert row["capped"] and not row["reached"] and row["returncode"] == 130  # Ctrl-C: saved, exit 128 + 2
    assert 17 < row["wall_s"] < 90 and row["last_step"] > 0 and row["sps"] > 0
    assert "--seed 3 --target-return 18.0" in row["command"]
    assert list((folder / "rlfast_seed3" / "runs").glob("*/checkpoint.pt"))
    table = (folder / "table.md").read_text()
    assert "| rlfast | 3 | no | not in 0." in table and "| rlfast | all | 0 of 1 |" in table
    assert (folder / "curves.png").stat().st_size > 0
    with pytest.raises(SystemExit, match="--demo must be one of"):
        bench.main(bench.Args(demo="breakout", out=str(tmp_path / "x")))
