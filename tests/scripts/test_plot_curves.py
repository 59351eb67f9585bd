"""``scripts/plot_curves.py``: the runs of an experiment averaged over seeds on a common grid of steps, pauses left
out of wall time, a PNG written."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from torch.utils.tensorboard import SummaryWriter

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
pytest.importorskip("matplotlib")


def fake_run(folder: Path, name: str, returns: list[float], steps_apart: int = 100, pause_after: int = -1):
    """A run dir whose ``charts/episodic_return`` has ``returns``, one every ``steps_apart`` steps, one second apart
    (an hour's pause after the ``pause_after``-th)."""
    writer = SummaryWriter(str(folder / name))
    wall = 1_000_000.0
    for i, r in enumerate(returns):
        wall += 1.0 + (3600.0 if i == pause_after + 1 and pause_after >= 0 else 0.0)
        writer.add_scalar("charts/episodic_return", r, (i + 1) * steps_apart, walltime=wall)
    writer.close()
    return folder / name


def test_curves_are_smoothed_and_averaged_over_seeds(load_script, tmp_path):
    plot = load_script("plot_curves.py")
    a = fake_run(tmp_path, "Pong-v5__ppo__1__100", [0, 2, 4, 6, 8, 10])
    b = fake_run(tmp_path, "Pong-v5__ppo__2__101", [10, 12, 14, 16, 18, 20], pause_after=2)
    fake_run(tmp_path, "Pong-v5__dqn__1__102", [1, 1, 1, 1, 1, 1])
    assert plot.experiment(a) == "Pong-v5__ppo"
    curve = plot.read_curve(a, "charts/episodic_return", window=2)
    np.testing.assert_allclose(curve[:, 0], [200, 300, 400, 500, 600])
    np.testing.assert_allclose(curve[:, 2], [1, 3, 5, 7, 9])  # the mean of the last 2 returns
    paused = plot.read_curve(b, "charts/episodic_return", window=2)
    np.testing.assert_allclose(paused[:, 1], [1, 2, 3, 4, 5])  # the hour's pause is not training time
    x, values = plot.on_grid([curve, paused], column=0)
    assert x[0] == 200 and x[-1] == 600 and values.shape == (2, plot.GRID)
    np.testing.assert_allclose(values.mean(0)[[0, -1]], [(1 + 11) / 2, (9 + 19) / 2])
    assert sorted(map(plot.experiment, plot.find_runs([str(tmp_path)]))) == ["Pong-v5__dqn", "Pong-v5__ppo",
                                                                              "Pong-v5__ppo"]  # fmt: skip


def test_the_command_writes_the_png(tmp_path):
    fake_run(tmp_path / "runs", "CartPole-v1__ppo__1__100", list(range(30)))
    fake_run(tmp_path / "runs", "CartPole-v1__ppo__2__101", list(range(5)))  # fewer than --window values
    proc = subprocess.run([sys.executable, str(SCRIPTS / "plot_curves.py"), "runs", "--out", "c.png"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "CartPole-v1__ppo__2__101: fewer than 20 values of charts/episodic_return, left out" in proc.stdout
    assert "CartPole-v1__ppo: 1 run(s), final mean 19.50" in proc.stdout
    assert (tmp_path / "c.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    empty = subprocess.run([sys.executable, str(SCRIPTS / "plot_curves.py"), "nothing"], cwd=tmp_path,
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert empty.returncode == 1 and "error: no run dirs with TensorBoard events in nothing" in empty.stderr
