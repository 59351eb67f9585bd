"""bench_demo.py: the timing from the command's start, the 20-episode window, a capped run and the table (the
demos themselves run for minutes: benchmarks/, not here; rl_games is not installed here)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

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
    args = bench.Args(demo="pong", seeds=(3,), out=str(tmp_path / "out"), cap_minutes=0.3, preset=str(preset),
                      evaluate=1)  # fmt: skip
    bench.main(args)
    folder = tmp_path / "out" / "pong"
    (row,) = json.loads((folder / "curves.json").read_text())["rows"]
    assert row["capped"] and not row["reached"] and row["returncode"] == 130  # Ctrl-C: saved, exit 128 + 2
    assert 17 < row["wall_s"] < 90 and row["last_step"] > 0 and row["sps"] > 0
    assert "--seed 3 --target-return 18.0" in row["command"]
    assert list((folder / "rlfast_seed3" / "runs").glob("*/checkpoint.pt"))
    table = (folder / "table.md").read_text()
    assert "| rlfast | 3 | no | not in 0." in table
    # the final policy's games (scripts/evaluate.py, after the timing), greedy and sampled: their scores in the row
    scores = []
    for name, policy in (("evaluate.txt", "greedy"), ("evaluate_sampled.txt", "sampled")):
        lines = (folder / "rlfast_seed3" / name).read_text().splitlines()
        assert lines[0].startswith("Pong-v5: ppo_atari.py checkpoint at step") and lines[0].endswith(f"{policy} policy")
        summary = next(line for line in lines if line.startswith("return: "))
        score = float(summary.split()[1])
        assert -21 <= score <= 21 and f"returns: {score:g}" in lines  # one game: --per-episode's line is the mean
        scores.append(score)
    assert f"| {scores[0]:.2f} ± 0.00 | {scores[1]:.2f} ± 0.00 | `python scripts/ppo_atari.py" in table
    assert "| rlfast | all | 0 of 1 |  | | | | 0 of 1 at 18 or more | 0 of 1 at 18 or more | |" in table
    # --evaluate-missing plays only what a row lacks, and runs no seed
    (folder / "rlfast_seed3" / "evaluate_sampled.txt").unlink()
    greedy_before = (folder / "rlfast_seed3" / "evaluate.txt").read_text()
    bench.main(bench.Args(demo="pong", seeds=(4,), out=str(tmp_path / "out"), evaluate=1, evaluate_missing=True))
    assert (folder / "rlfast_seed3" / "evaluate.txt").read_text() == greedy_before
    assert (folder / "rlfast_seed3" / "evaluate_sampled.txt").read_text().splitlines()[0].endswith("sampled policy")
    assert not (folder / "rlfast_seed4").exists()
    with pytest.raises(SystemExit, match="--evaluate must be >= 1, got 0"):
        bench.main(bench.Args(demo="pong", out=str(tmp_path / "out"), evaluate=0, evaluate_missing=True))
    assert (folder / "curves.png").stat().st_size > 0
    with pytest.raises(SystemExit, match="--demo must be one of"):
        bench.main(bench.Args(demo="breakout", out=str(tmp_path / "x")))


def test_the_report_keeps_every_row_measured_in_the_folder(load_bench, tmp_path):
    bench = load_bench("bench_demo.py")
    folder = tmp_path / "out" / "ant"
    for system, seed, reached in (("rl_games", 1, False), ("rlfast", 2, True), ("rlfast", 1, True)):
        (folder / f"{system}_seed{seed}").mkdir(parents=True)
        row = {"system": system, "seed": seed, "reached": reached, "minutes": 5.0 if reached else None,
               "steps": 2_000_000 if reached else None, "wall_s": 720.0, "cap_s": 720.0, "last_step": 4_000_000,
               "sps": 6000.0, "best": 5100.0 if reached else 3400.0, "command": f"python x --seed {seed}",
               "curve": [[60.0, 100_000, 900.0], [300.0, 2_000_000, 5100.0 if reached else 3400.0]]}
        (folder / f"{system}_seed{seed}" / "row.json").write_text(json.dumps(row))
    (folder / "rlfast_seed1" / "evaluate.txt").write_text("Ant-v5: ppo_continuous.py checkpoint at step 2,000,000, "
                                                          "greedy policy\nepisodes: 10\nreturn: 5512.25 ± 40.50  "
                                                          "(min 5400.0, max 5600.0)\n# a note\n")  # fmt: skip
    # a report for seed 2 without --peer: seed 1 and rl_games' row stay in the table and curves
    bench.main(bench.Args(demo="ant", seeds=(2,), out=str(tmp_path / "out"), report_only=True))
    rows = json.loads((folder / "curves.json").read_text())["rows"]
    assert [(r["system"], r["seed"]) for r in rows] == [("rlfast", 1), ("rlfast", 2), ("rl_games", 1)]
    table = (folder / "table.md").read_text()
    assert "| rlfast | all | 2 of 2 | median 5.0 min | | | | 1 of 1 at 5000 or more |  | |" in table
    assert "| rl_games | all | 0 of 1 |" in table
    assert "| 5100.0 | 5512.25 ± 40.50 | - | `python x --seed 1` |" in table  # evaluate.txt read, by hand or not
    assert "| 5100.0 | - | - | `python x --seed 2` |" in table  # none for seed 2
    assert "| rl_games | 1 | no | not in 12.0 | (4,000,000 run) |" in table


def test_the_peer_gets_its_flags_before_its_out_folder(load_bench, tmp_path):
    bench = load_bench("bench_demo.py")
    peer = tmp_path / "peer_python"  # stands in for the peer's Python: records the command it was given
    peer.write_text('#!/bin/sh\necho "$@" > argv.txt\n')
    peer.chmod(0o755)
    args = bench.Args(demo="ant", seeds=(2,), out=str(tmp_path / "out"), peer="rl_games", peer_python=str(peer),
                      peer_flags=("--no-contact-forces",), cap_minutes=1.0)  # fmt: skip
    row = bench.run_one("rl_games", args, 2, tmp_path / "out" / "ant")
    argv = (tmp_path / "out" / "ant" / "rl_games_seed2" / "argv.txt").read_text().split()
    assert argv[0].endswith("rlgames_demo.py")
    assert argv[1:] == ["--task", "ant", "--seed", "2", "--no-contact-forces", "--out", "train"]
    assert row["command"].endswith("rlgames_demo.py --task ant --seed 2 --no-contact-forces")  # the table's command
    assert not row["reached"] and row["curve"] == []  # no events written
    with pytest.raises(SystemExit, match="--peer-flags --no-contact-forces need a --peer"):
        bench.main(bench.Args(demo="ant", out=str(tmp_path / "x"), peer_flags=("--no-contact-forces",)))


def test_ctrl_c_to_the_benchmark_stops_its_run_too(tmp_path):
    # the run has a session of its own (a terminal's Ctrl-C reaches the benchmark only): the benchmark must stop it
    root = Path(__file__).resolve().parents[2]
    preset = tmp_path / "tiny.toml"
    preset.write_text('num_envs = 2\nnum_steps = 16\ntotal_timesteps = 100000000\ntorch_threads = 1\n')
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, str(root / "benchmarks" / "bench_demo.py"), "--demo", "pong", "--seeds",
                             "3", "--out", str(out), "--cap-minutes", "5", "--preset", str(preset)], cwd=root,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip
    log = out / "pong" / "rlfast_seed3" / "log.txt"
    deadline = time.time() + 120
    while time.time() < deadline and not (log.exists() and "step " in log.read_text()):
        time.sleep(0.5)
    assert log.exists() and "step " in log.read_text(), "the run did not start"
    os.kill(proc.pid, signal.SIGINT)
    output = proc.communicate(timeout=120)[0]
    assert proc.returncode == 1 and "interrupted: rlfast seed 3 stopped" in output, output
    assert "interrupted at step" in log.read_text()  # the trainer got its SIGINT and saved its checkpoint
    assert list((out / "pong" / "rlfast_seed3" / "runs").glob("*/checkpoint.pt"))
    alive = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if str(preset).encode() in cmdline:
            alive.append(pid)
    assert not alive, f"left running: {alive}"
