"""Shared fixtures and markers."""

import importlib.util
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Optional

import pytest
import torch


def pytest_collection_modifyitems(config, items):
    skip = None if torch.cuda.is_available() else pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if skip is not None and "cuda" in item.keywords:
            item.add_marker(skip)
        # .ci/run reruns these from a pytest whose SIGINT is ignored from birth (their outcome depends on how
        # this process was started; the trainers' Ctrl-C tests start their trainer that way in every run).
        if "sigint_raises" in getattr(item, "fixturenames", ()):
            item.add_marker("own_sigint")


def _import_file(path: Path, *folders: Path) -> ModuleType:
    """``path`` imported as a module named by its stem (registered in sys.modules, as tyro and dataclasses need),
    with ``folders`` importable as when the file runs as a script."""
    for folder in folders:
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def load_script():
    """``load_script("ppo.py")``: a file of ``scripts/`` imported as a module (``_import_file``), ``scripts/``
    importable as when it runs."""
    scripts = Path(__file__).resolve().parents[1] / "scripts"
    return lambda name: _import_file(scripts / name, scripts)


@pytest.fixture
def load_bench():
    """``load_bench("bench_dqn.py")``: a file of ``benchmarks/`` imported as a module (``_import_file``), with
    ``benchmarks/`` importable as when the script runs from there (its neighbours: ``speed_options``, ``trainers``,
    ``bench_envs``)."""
    benchmarks = Path(__file__).resolve().parents[1] / "benchmarks"
    return lambda name: _import_file(benchmarks / name, benchmarks)


@pytest.fixture
def sigint_raises():
    """SIGINT raises KeyboardInterrupt in this process for the test's duration, also where the test command
    was started with SIGINT ignored (a background job of a non-interactive shell, some CI runners): Python
    then never installs its handler, and a test that sends itself SIGINT would wait for nothing."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture
def interrupt_training():
    """``interrupt_training(script, *flags, cwd=..., env=None, sig=SIGINT)``: starts ``scripts/<script>`` with
    ``flags`` and SIGINT ignored (as a trainer started in the background from a script is, whatever launched
    pytest), waits until training is under way (its first progress line), sends ``sig`` (Ctrl-C, or SIGTERM)
    and checks the clean exit every trainer owes: status 128 + sig, no traceback, and the message naming
    the step and iteration of the ``checkpoint.pt`` it wrote to ``cwd/runs/<run>``. Returns
    ``(stdout, checkpoint)``."""
    from rlfast.algos.checkpoint import load_checkpoint

    scripts = Path(__file__).resolve().parents[1] / "scripts"

    def interrupt(
        script: str, *flags: str, cwd: Path, env: Optional[dict] = None, sig: int = signal.SIGINT
    ) -> tuple[str, dict]:
        # bash execs the trainer with SIGINT ignored; the trainer must install its own handler.
        cmd = ["bash", "-c", 'trap "" INT; exec "$@"', "bash", sys.executable, str(scripts / script), *flags]
        proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        head = []
        try:
            while not (line := proc.stdout.readline()).startswith("step"):  # training is under way
                assert line, f"{script} ended before training: {proc.stderr.read()}"
                head.append(line)
            time.sleep(0.5)
            proc.send_signal(sig)
            out, err = proc.communicate(timeout=60)
            out = "".join(head) + line + out
        finally:
            proc.kill()
        assert proc.returncode == 128 + sig and "Traceback" not in err, (proc.returncode, err)
        (run_dir,) = (cwd / "runs").iterdir()
        ckpt = load_checkpoint(run_dir / "checkpoint.pt")
        assert f"interrupted at step {ckpt['global_step']:,} (iteration {ckpt['iteration']}): saved " in out, out
        assert ckpt["iteration"] >= 1
        return out, ckpt

    return interrupt


@pytest.fixture(scope="session")
def run_dir_of():
    """``run_dir_of(proc, cwd)``: the one run dir a trainer run in ``cwd`` wrote to ``cwd/runs``, once its process
    (a ``subprocess.CompletedProcess``) is checked to have ended with status 0."""

    def check(proc: subprocess.CompletedProcess, cwd: Path) -> Path:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        (run_dir,) = (cwd / "runs").iterdir()
        return run_dir

    return check


PPO_TAGS = {
    "charts/episodic_return", "charts/episodic_length", "charts/learning_rate", "charts/SPS",
    "losses/policy_loss", "losses/value_loss", "losses/entropy", "losses/approx_kl", "losses/old_approx_kl",
    "losses/clipfrac", "losses/explained_variance", "perf/env", "perf/inference", "perf/train", "perf/other",
}  # fmt: skip
"""what every PPO trainer logs: CleanRL's scalars and the profile's sections"""


@pytest.fixture
def ppo_log():
    """``ppo_log(run_dir, iterations, lr)``: the run's TensorBoard log (an ``EventAccumulator``), once it is checked
    to hold ``PPO_TAGS``, one profile point per iteration and a learning rate annealed from ``lr``."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    def check(run_dir: Path, iterations: int, lr: float):
        acc = EventAccumulator(str(run_dir))
        acc.Reload()
        scalars = set(acc.Tags()["scalars"])
        assert PPO_TAGS <= scalars, PPO_TAGS - scalars
        assert len(acc.Scalars("perf/env")) == iterations
        lrs = [e.value for e in acc.Scalars("charts/learning_rate")]
        assert lrs == sorted(lrs, reverse=True) and lrs[0] == pytest.approx(lr)  # annealed, logged after iteration 1
        return acc

    return check


@pytest.fixture
def pixel_env():
    """The environment variables of a process that finds ``dotframes`` (``examples/dotframes.py``), a user's module
    registering pixel envs: ``dotframes:DotFrame-v0`` (uint8 frames (1, 84, 84)), ``DotFrames-v0`` (4 of them stacked
    by the env: (4, 84, 84)) and ``DotFramesFloat-v0`` (float32 (4, 84, 84)); it is importable in this process too."""
    folder = str(Path(__file__).resolve().parents[1] / "examples")
    sys.path.insert(0, folder)
    yield {**os.environ, "PYTHONPATH": f"{folder}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    sys.path.remove(folder)
    sys.modules.pop("dotframes", None)


@pytest.fixture(autouse=True)
def keeps_the_denormal_mode():
    """Puts this thread's denormal mode (FTZ/DAZ) back after every test: a trainer run in this process may stop
    before the ``with run:`` that would undo its ``--flush-denormals`` (a usage error raised by the trainer's own
    checks), and a test that makes denormals must see them."""
    from rlfast.algos.speed import denormals_flushed

    flushed = denormals_flushed()
    yield
    if denormals_flushed() != flushed:
        torch.set_flush_denormal(flushed)
