"""RunLog: episodes land at the global step they ended, the return window, SPS and the progress line."""

import torch
from tensorboard.backend.event_processing import event_accumulator

from rlfast.algos.runlog import RunLog, format_eta, run_dir_name


def scalars(run_dir, tag):
    acc = event_accumulator.EventAccumulator(str(run_dir))
    acc.Reload()
    return [(e.step, e.value) for e in acc.Scalars(tag)]


def test_episodes_are_logged_at_the_step_they_ended(tmp_path, capsys):
    log = RunLog(tmp_path, {"lr": 0.1}, total_steps=100, window=2)
    done = torch.zeros(3, 4, dtype=torch.bool)  # T=3 steps x B=4 envs
    done[0, 2] = done[2, 1] = done[2, 3] = True
    ret = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    length = torch.arange(12, dtype=torch.int32).reshape(3, 4) + 100
    log.episodes(done, ret, length, iteration_step=40)
    log.progress(52, final=True)
    log.close()
    # rows ended at 40 + (t + 1) * 4: t=0 -> 44, t=2 -> 52
    assert scalars(tmp_path, "charts/episodic_return") == [(44, 2.0), (52, 9.0), (52, 11.0)]
    assert [v for _, v in scalars(tmp_path, "charts/episodic_length")] == [102.0, 109.0, 111.0]
    assert log.window_full and log.mean_return == 10.0  # window of the last 2
    out = capsys.readouterr().out
    assert "52/100" in out and "return   10.00 (last 2 ep)" in out


def test_mean_return_is_nan_before_any_episode_and_the_line_shows_a_dash(tmp_path, capsys):
    log = RunLog(tmp_path, {}, total_steps=10)
    assert log.mean_return != log.mean_return and not log.window_full
    log.progress(5, final=True)
    log.close()
    log.close()  # idempotent: the run layer closes it on every way out
    line = capsys.readouterr().out.strip()
    assert line.endswith("| return       -") and "nan" not in line, line


def test_sps_counts_from_the_first_progress_call(tmp_path):
    log = RunLog(tmp_path, {}, total_steps=1000, start_step=100)
    log.progress(200)
    first = log.sps
    assert first > 0
    log.progress(200)  # no new steps: SPS stays
    assert log.sps == first
    log.close()
    assert [s for s, _ in scalars(tmp_path, "charts/SPS")] == [200, 200]


def test_format_eta_and_run_dir_name():
    assert format_eta(3725) == "1:02:05" and format_eta(-5) == "0:00:00"
    env, exp, seed, stamp = run_dir_name("Pong-v5", "ppo_atari", 3).split("__")
    assert (env, exp, seed) == ("Pong-v5", "ppo_atari", "3") and stamp.isdigit()
