"""benchmarks/bench_learning.py with tiny budgets: seeds really train (CartPole with ppo.py), curves and tables
come from their logs, a second call reads finished seeds back instead of running them again, and an
unfinished seed is resumed from its checkpoint."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = str(ROOT / "benchmarks" / "bench_learning.py")
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}
TASK = ["--script", "ppo.py", "--env-id", "CartPole-v1", "--jobs", "1", "--threshold", "30"]
BENCH = [*TASK, "--seeds", "1", "2"]
TRAINER = ["--", "--num-envs", "4", "--num-steps", "64", "--no-cuda", "--save-minutes", "0"]


@pytest.fixture(scope="module")
def bench(run_file):
    """``bench(out, *args)``: bench_learning.py with ``--out out`` and ``args``, to its end (forked, ``run_file``)"""
    return lambda out, *args: run_file(SCRIPT, "--out", out, *args, timeout=600, env=ENV)


@pytest.fixture(scope="module")
def done(bench, tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "cartpole"
    proc = bench(out, *BENCH, "--total-timesteps", "4096", *TRAINER)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out, proc


def test_each_seed_trains_and_the_table_summarizes_its_curve(done):
    out, proc = done
    result = json.loads((out / "curves.json").read_text())
    assert set(result["runs"]) == {"1", "2"}
    for seed, r in result["runs"].items():
        assert r["finished"] and r["steps"] == 4096 and r["sps"] > 0, seed
        c = r["curve"]
        assert len(c["steps"]) == len(c["seconds"]) == len(c["mean_return"]) > 0
        assert c["steps"] == sorted(c["steps"]) and c["seconds"] == sorted(c["seconds"])
        assert r["final"] == pytest.approx(c["mean_return"][-1], abs=0.01) and r["best"] >= r["final"]
        assert r["episodes"] >= 20  # CartPole episodes of a random-ish policy are short
        reached = r["to_threshold"]["steps"]
        assert reached is None or min(c["steps"]) <= reached <= 4096
        # the equal-steps marks (every 100 steps of a 4,096-step run) read from the curve, here not thinned
        assert len(c["steps"]) < 400 and r["at"] and set(r["at"]) <= {str(m) for m in range(100, 4001, 100)}
        for mark, mean in r["at"].items():
            assert mean == c["mean_return"][max(i for i, s in enumerate(c["steps"]) if s <= int(mark))], mark
    table = (out / "table.md").read_text()
    assert table in proc.stdout and "steps to 30" in table and "| median |" in table
    assert (out / "curves.png").stat().st_size > 10_000
    log = (out / "logs" / "seed1.log").read_text()
    assert (out / "logs" / "seed2.log").exists()
    # logs are committed with results: the command they show names no path of this machine
    assert "$ python3 scripts/ppo.py " in log
    assert sys.executable not in log and str(ROOT) not in log


def test_a_second_call_reads_finished_seeds_back(bench, done):
    out, _ = done
    before = json.loads((out / "curves.json").read_text())["runs"]
    proc = bench(out, *BENCH, "--total-timesteps", "4096", *TRAINER)
    assert proc.returncode == 0 and "started" not in proc.stdout, proc.stdout + proc.stderr
    after = json.loads((out / "curves.json").read_text())["runs"]
    assert [r["run_dir"] for r in after.values()] == [r["run_dir"] for r in before.values()]


def test_compare_sets_another_groups_summary_beside_these_runs(bench, done, tmp_path):
    out, _ = done
    other = tmp_path / "other"
    other.mkdir()
    theirs = json.loads((out / "curves.json").read_text())
    theirs["label"] = "the same in float32"
    for r in theirs["runs"].values():  # one of them reached 30 at step 1234, the other never
        r["final"], r["best"] = r["final"] - 100, r["best"] - 100
    theirs["runs"]["1"]["to_threshold"] = {"steps": 1234, "seconds": 1.0, "threshold": 30}
    theirs["runs"]["2"]["to_threshold"] = {"steps": None, "seconds": None, "threshold": 30}
    (other / "curves.json").write_text(json.dumps(theirs))
    proc = bench(out, *BENCH, "--report-only", "--compare", str(other))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = next(x for x in (out / "table.md").read_text().splitlines() if x.startswith("- the same in float32:"))
    finals = sorted(r["final"] for r in theirs["runs"].values())
    assert f"2 seeds, 4,096 steps or more; median final {sum(finals) / 2:,.0f}" in line
    assert line.endswith("1 of 2 reached 30 (at 1,234)")
    table = (out / "table.md").read_text()
    assert "Windowed mean at equal steps" in table
    equal = table.split("Windowed mean at equal steps")[1].split("\n\n")[1]  # the table after its title
    rows = [x.split(" | ")[0] for x in equal.splitlines()[2:]]
    assert rows == ["| seed 1", "| seed 2", "| the same in float32, seed 1", "| the same in float32, seed 2"]


def test_equal_steps_marks_and_table(load_bench):
    bl = load_bench("bench_learning.py")
    points = [(150, 0.0, -5.0), (250, 0.0, -4.0), (1000, 0.0, 2.5), (1900, 0.0, 7.0)]  # (step, seconds, mean)
    # 1,950 steps: marks every 100; none before the first full window (step 150)
    assert bl.at_marks(points, 1950) == {
        "200": -5.0, "300": -4.0, **{str(m): -4.0 for m in range(400, 1000, 100)}, "1000": 2.5,
        **{str(m): 2.5 for m in range(1100, 1900, 100)}, "1900": 7.0}  # fmt: skip
    assert bl.at_marks(points, 0) == {} and bl.at_marks([], 5000) == {}
    ours = {"1": {"steps": 1950, "at": bl.at_marks(points, 1950)}}
    theirs = {"1": {"steps": 1000, "at": {"500": 1.0, "1000": 3.0}}, "2": {"curve": {}}}  # 2: an older curves.json
    marks, rows = columns(bl.equal_steps([("", ours), ("fp32, ", theirs)]))
    assert marks == list(range(200, 1901, 200))  # 18 marks held: every 2nd, at most 12 columns
    assert rows[0] == "| seed 1 | -5.00 | -4.00 | -4.00 | -4.00 | 2.50 | 2.50 | 2.50 | 2.50 | 2.50 |"
    assert rows[1] == "| fp32, seed 1 | - | - | - | - | 3.00 | - | - | - | - |" and len(rows) == 2
    # a run stopped at 330 steps (marked every 10) beside a longer one (every 100): the columns keep the
    # longer run's grid, evenly spaced, rather than 60, 120, ... 300 then 600, 900
    stopped = {"1": {"steps": 330, "at": bl.at_marks([(50, 0.0, -9.0), (290, 0.0, -7.0)], 330)}}
    assert len(stopped["1"]["at"]) == 29  # 50, 60, ... 330
    marks, rows = columns(bl.equal_steps([("", stopped), ("bf16, ", ours)]))
    assert marks == list(range(200, 1901, 200))
    assert rows[0] == "| seed 1 | -9.00 | - | - | - | - | - | - | - | - |"
    assert [bl.fmt_return(x) for x in (5091.4, -17.63, 0.824, None)] == ["5,091", "-17.6", "0.82", "-"]


def test_episodes_logged_at_one_step_keep_their_order_in_the_window(load_bench, tmp_path):
    """APPO logs a batch's episodes at one step: the window takes them in logging order, not sorted by value (which
    would put a batch's best last and raise every windowed mean)."""
    from torch.utils.tensorboard import SummaryWriter

    bl = load_bench("bench_learning.py")
    writer = SummaryWriter(str(tmp_path))
    for i in range(40):  # 1, 0, 1, 0, ...: any 20 in a row average 0.5; sorted by value, the last 20 would be 1s
        writer.add_scalar("charts/episodic_return", float(i % 2 == 0), 1024)
    writer.add_scalar("charts/SPS", 100.0, 1024)
    writer.close()
    run = bl.curve(tmp_path, 20)
    assert run["final"] == pytest.approx(0.5) and run["best"] == pytest.approx(0.5)


def test_greedy_evaluations_are_read_tabled_and_drawn(bench, tmp_path):
    """A trainer's --eval-every evaluations (eval/episodic_return): their curve in curves.json, the best (the
    earliest of equal ones) in a column of the table, drawn as dots beside the training curve."""
    from torch.utils.tensorboard import SummaryWriter

    out = tmp_path / "evals"
    writer = SummaryWriter(str(out / "runs" / "CartPole-v1__ppo__1__123"))
    for i in range(1, 41):
        writer.add_scalar("charts/episodic_return", float(i), 100 * i)
        writer.add_scalar("charts/SPS", 100.0, 100 * i)
    for step, value in ((1000, 12.0), (2000, 31.5), (3000, 31.5), (4000, 20.0)):
        writer.add_scalar("eval/episodic_return", value, step)
    writer.close()
    proc = bench(out, *TASK, "--seeds", "1", "--report-only")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = json.loads((out / "curves.json").read_text())["runs"]["1"]
    assert run["evals"]["steps"] == [1000, 2000, 3000, 4000] and run["evals"]["mean_return"] == [12, 31.5, 31.5, 20]
    assert run["evals"]["seconds"] == sorted(run["evals"]["seconds"]) and run["best_eval"] == [31.5, 2000]
    table = (out / "table.md").read_text().splitlines()
    head = table[2].strip("| ").split(" | ")
    row = dict(zip(head, table[4].strip("| ").split(" | ")))
    assert row["best greedy evaluation (step)"] == "31.5 (2,000)"
    assert row["steps to 30"] == "4,000"  # the window of episodes 21-40: 30.5
    assert all(line.count("|") == table[2].count("|") for line in table[3:6])  # the median row too
    assert (out / "curves.png").stat().st_size > 10_000


def columns(lines: list[str]) -> tuple[list[int], list[str]]:
    """The marks (column heads) and the rows of an equal-steps table."""
    marks = [int(float(m[:-1]) * 1e6) if m.endswith("M") else int(m.replace(",", ""))
             for m in lines[3].strip("| ").split(" | ")[1:]]  # fmt: skip
    return marks, lines[5:]


def test_an_unfinished_seed_is_resumed(bench, tmp_path):
    out = tmp_path / "cartpole"
    proc = bench(out, *TASK, "--seeds", "1", "--total-timesteps", "512", *TRAINER)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = (out / "runs").iterdir()
    (run_dir / "finished").unlink()  # as if the session had ended mid-run
    proc = bench(out, *TASK, "--seeds", "1", "--total-timesteps", "1024", *TRAINER)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "--resume" in (out / "logs" / "seed1.log").read_text()
    (again,) = (out / "runs").iterdir()
    assert again == run_dir and json.loads((out / "curves.json").read_text())["runs"]["1"]["steps"] == 1024


def test_threads_named_after_the_separator_replace_the_cores_share(bench, load_bench, tmp_path):
    bl = load_bench("bench_learning.py")
    out = tmp_path / "cartpole"  # pinned to every core here, but told to use one thread
    proc = bench(out, *TASK, "--seeds", "1", "--total-timesteps", "512", *TRAINER, "--num-threads", "1",
                 "--torch-threads=1")  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (start,) = [line for line in (out / "logs" / "seed1.log").read_text().splitlines() if line.startswith("$ ")]
    assert start.count("--num-threads") == 1 and start.count("--torch-threads") == 1, start
    placement = json.loads((out / "logs" / "seed1.json").read_text())
    assert placement["threads"] == "1" and placement["cores"] == len(os.sched_getaffinity(0))
    assert f"| {placement['cores']} (1) |" in (out / "table.md").read_text()
    # what a placement file from before "threads" was recorded reads instead: the log's last command line
    log = tmp_path / "old.log"
    log.write_text("$ python3 scripts/ppo.py --num-threads 2 --torch-threads 2 --num-threads 1\nstep 1\n"
                   "$ python3 scripts/ppo.py --resume r --num-threads 2 --torch-threads 2 --torch-threads 1\n")
    assert bl.threads_from_log(log) == "env 2, torch 1" and bl.threads_from_log(tmp_path / "none.log") is None
    assert bl.threads_given(["x", "--num-threads", "2", "--torch-threads=2"]) == "2"


def test_a_finished_seed_that_was_not_marked_counts_as_finished(bench, tmp_path):
    out = tmp_path / "cartpole"
    proc = bench(out, *TASK, "--seeds", "1", "--total-timesteps", "512", *TRAINER)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = (out / "runs").iterdir()
    (run_dir / "finished").unlink()  # as if the benchmark had stopped right after its trainer ended
    proc = bench(out, *TASK, "--seeds", "1", "--total-timesteps", "512", *TRAINER)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "already holds 2 of the 2 iterations asked for" in (out / "logs" / "seed1.log").read_text()
    assert (run_dir / "finished").exists() and "seed 1: finished" in proc.stdout


def test_a_python_env_id_is_found_under_its_run_dir_name(bench, tmp_path):
    out = tmp_path / "python_env"  # gymnasium:CartPole-v1 runs in worker processes; its run dir names it without ':'
    proc = bench(out, "--script", "ppo.py", "--env-id", "gymnasium:CartPole-v1", "--jobs", "1", "--seeds", "1",
                 "--total-timesteps", "512", *TRAINER)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = (out / "runs").iterdir()
    assert run_dir.name.startswith("gymnasium_CartPole-v1__") and (run_dir / "finished").exists()
    assert json.loads((out / "curves.json").read_text())["runs"]["1"]["steps"] == 512


def test_a_run_that_ended_before_its_first_episode_is_reported_without_a_curve(bench, tmp_path):
    out = tmp_path / "mountaincar"  # its episodes last 200 steps: none ends within 64
    proc = bench(out, "--script", "ppo.py", "--env-id", "MountainCar-v0", "--jobs", "1", "--seeds", "1",
                 "--total-timesteps", "64", "--", "--num-envs", "4", "--num-steps", "16", "--no-cuda",
                 "--save-minutes", "0")  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run = json.loads((out / "curves.json").read_text())["runs"]["1"]
    assert run["steps"] == 64 and run["episodes"] == 0 and run["final"] is None
    assert run["curve"]["steps"] == [] and (out / "table.md").exists()


def test_a_signal_to_the_benchmark_alone_checkpoints_its_trainers(tmp_path):
    """As from a background job (SIGINT ignored from birth) stopped with `kill -INT`: only this process gets the
    signal; it hands one SIGINT to each running trainer, which saves its checkpoint, and exits after waiting for
    it (resuming from such a checkpoint: test_an_unfinished_seed_is_resumed)."""
    out = tmp_path / "cartpole"
    cmd = [sys.executable, SCRIPT, "--out", str(out), *TASK, "--seeds", "1", "--total-timesteps", "10000000", *TRAINER]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))  # fmt: skip
    log = out / "logs" / "seed1.log"
    deadline = time.monotonic() + 120
    while not (log.exists() and "SPS" in log.read_text()):
        assert proc.poll() is None and time.monotonic() < deadline, "the trainer never reported a step"
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    try:
        stdout, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("the benchmark did not stop on SIGINT") from None
    assert proc.returncode == 1 and "interrupted: the same command resumes" in stdout, stdout
    assert "interrupted at step" in log.read_text()
    (run_dir,) = (out / "runs").iterdir()
    assert (run_dir / "checkpoint.pt").exists() and not (run_dir / "finished").exists()
