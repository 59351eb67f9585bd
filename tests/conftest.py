"""Shared fixtures and markers."""

import contextlib
import importlib.util
import json
import os
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from collections import OrderedDict
from pathlib import Path
from types import ModuleType
from typing import Optional

import pytest
import torch


ROOT = Path(__file__).resolve().parents[1]
"""the checkout holding these tests"""

SLOWEST_FILES = (
    "tests/benchmarks/test_bench_faults.py", "tests/benchmarks/test_bench_learning.py", "tests/scripts/test_appo.py",
    "tests/scripts/test_dqn.py", "tests/scripts/test_dqn_atari.py", "tests/scripts/test_ppo_atari.py",
    "tests/scripts/test_eval_video.py", "tests/benchmarks/test_bench_pbt.py", "tests/scripts/test_torchrun.py",
    "tests/benchmarks/test_bench_demo.py", "tests/scripts/test_golden.py", "tests/scripts/test_ppo.py",
)  # fmt: skip
"""The files whose tests take longest (50-120 s each beside another worker, of a 27-minute sum, on an AMD EPYC
with AVX2), slowest first. Under pytest-xdist's ``--dist loadfile`` a file is one unit of work: these go to the
workers first and the many short files last, so that no worker is left alone with one of them at the end (xdist's
own order, the files with the most tests first, started the 1-test bench_pbt file last: 46 s of a 535-s run with
one worker idle). Files not named keep their collection order."""


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "run_defaults(timeout=180, one_thread=False): a test file's defaults for its run fixture's runs"
    )
    if hasattr(config.option, "loadscopereorder"):  # pytest-xdist: dispatch files in collection order (SLOWEST_FILES)
        config.option.loadscopereorder = False
    # .ci/wheel tests an installed wheel with this checkout's tests: RLFAST_TEST_INSTALLED=1 makes importing the
    # checkout's rlfast instead (pytest started from the checkout, PYTHONPATH) a usage error, not a quiet pass.
    if os.environ.get("RLFAST_TEST_INSTALLED") == "1":
        import rlfast

        if ROOT in Path(rlfast.__file__).resolve().parents:
            raise pytest.UsageError(f"RLFAST_TEST_INSTALLED=1, but rlfast comes from the checkout: {rlfast.__file__}")


def pytest_report_header(config):
    import rlfast

    return f"rlfast: {Path(rlfast.__file__).parent}"


def pytest_collection_modifyitems(config, items):
    first = {name: i for i, name in enumerate(SLOWEST_FILES)}
    items.sort(key=lambda item: first.get(item.nodeid.split("::")[0], len(first)))  # stable: the rest keep their order
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


@pytest.fixture(scope="session")
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


zygote = _import_file(ROOT / "tests" / "zygote.py")  # the fork server's module: its READ_AFTER_LOAD


class Zygotes:
    """Trainer runs forked from a server that has imported what ``scripts/`` imports (``tests/zygote.py``), one
    server per distinct environment (variables read as a library loads come from the server's): ~3 s less per run
    than a new interpreter. ``RLFAST_TEST_ZYGOTE=0`` starts each run as a plain subprocess instead, as does a
    server that finds itself unsafe to fork (threads at a fork), with a warning. Tests of how a process
    starts (its imports, signals, ``exits_promptly``) start their own interpreters, not through this."""

    UNREAD = {"PYTEST_CURRENT_TEST", *zygote.READ_AFTER_LOAD}
    """variables no library the server loads reads as it loads, left out of the key (pytest sets the first anew
    for each test; the others this process picks up as its tests go, tests/zygote.py's READ_AFTER_LOAD, where a
    server refuses to serve if it loaded their readers); the run still gets the value it has"""

    KEEP = 3
    """servers kept (~0.5 GB each), the least recently used stopped first"""

    def __init__(self):
        self.servers: OrderedDict[frozenset, Optional[subprocess.Popen]] = OrderedDict()
        self.folder = Path(tempfile.mkdtemp(prefix="rlfast-zygote-"))
        self.runs = 0

    def server(self, env: dict) -> Optional[subprocess.Popen]:
        key = frozenset((k, v) for k, v in env.items() if k not in self.UNREAD)
        if key in self.servers:
            self.servers.move_to_end(key)
        else:
            while len(self.servers) >= self.KEEP:
                if (old := self.servers.popitem(last=False)[1]) is not None:
                    self.stop(old)
            proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "zygote.py")], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, bufsize=0, env=env, cwd=ROOT)  # fmt: skip
            reply = self.reply(proc, timeout=300)
            if not reply.get("ready"):
                warnings.warn(f"tests/zygote.py: {reply.get('why')}; trainer runs start new interpreters")
                self.stop(proc)
                proc = None
            self.servers[key] = proc
        return self.servers[key]

    @staticmethod
    def reply(proc: subprocess.Popen, timeout: Optional[float]) -> dict:
        """the server's next message; ``{}`` when none came within ``timeout`` seconds"""
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        if not ready:
            return {}
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"tests/zygote.py ended (status {proc.wait()}); its stderr is in the test's output")
        return json.loads(line)

    def run(self, cmd: list[str], cwd: Path, timeout: float, env: dict) -> Optional[subprocess.CompletedProcess]:
        """``subprocess.run(cmd, ...)`` of ``cmd = [python, script, *args]`` forked from the server for ``env``;
        None where there is none"""
        proc = self.server(env)
        if proc is None:
            return None
        self.runs += 1
        out, err = (self.folder / f"{self.runs}.{name}" for name in ("out", "err"))
        request = {"script": cmd[1], "args": cmd[2:], "cwd": str(cwd), "env": env, "out": str(out), "err": str(err)}
        proc.stdin.write((json.dumps(request) + "\n").encode())
        proc.stdin.flush()
        if "pid" not in (started := self.reply(proc, timeout=60)):
            raise RuntimeError(f"tests/zygote.py did not start {cmd[1]} within 60 s")
        pid = started["pid"]
        status = None
        try:
            status = self.reply(proc, timeout=timeout).get("status")
        finally:
            if status is None:  # past its timeout, or this test interrupted: kill it, as subprocess.run does
                with contextlib.suppress(ProcessLookupError):  # (it ended just now)
                    os.kill(pid, signal.SIGKILL)
                self.reply(proc, timeout=60)
        texts = [path.read_text() for path in (out, err)]
        out.unlink()
        err.unlink()
        if status is None:
            raise subprocess.TimeoutExpired(cmd, timeout, output=texts[0], stderr=texts[1])
        return subprocess.CompletedProcess(cmd, status, *texts)

    @staticmethod
    def stop(proc: subprocess.Popen) -> None:
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def close(self) -> None:
        for proc in self.servers.values():
            if proc is not None:
                self.stop(proc)
        shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture(scope="session")
def zygotes():
    """the session's ``Zygotes``, or None with ``RLFAST_TEST_ZYGOTE=0``"""
    if os.environ.get("RLFAST_TEST_ZYGOTE", "1") == "0":
        yield None
        return
    servers = Zygotes()
    yield servers
    servers.close()


@pytest.fixture(scope="module")
def run(request, zygotes):
    """``run(script, *args, cwd, timeout=180, env=None)``: runs ``scripts/<script>`` with ``args`` in ``cwd`` to its
    end and returns the ``subprocess.CompletedProcess`` (output captured as text, its status left to the test). A
    test file sets another default timeout, or one OpenMP thread for every run (OMP_NUM_THREADS=1 added to ``env``,
    this process's environment by default), with ``pytestmark = pytest.mark.run_defaults(timeout=...,
    one_thread=True)``. The run is forked from a server that has the scripts' imports loaded (``Zygotes``) unless
    ``RLFAST_TEST_ZYGOTE=0``."""
    scripts = Path(__file__).resolve().parents[1] / "scripts"
    marker = request.node.get_closest_marker("run_defaults")
    defaults = {"timeout": 180, "one_thread": False, **(marker.kwargs if marker else {})}

    def run_script(
        script: str, *args: str, cwd: Path, timeout: float = defaults["timeout"], env: Optional[dict] = None
    ) -> subprocess.CompletedProcess:
        env = dict(os.environ if env is None else env)
        if defaults["one_thread"]:
            env["OMP_NUM_THREADS"] = "1"
        return _run_python(zygotes, scripts / script, args, cwd, timeout, env)

    return run_script


def _run_python(zygotes, path: Path, args, cwd: Path, timeout: float, env: dict) -> subprocess.CompletedProcess:
    """``python <path> <args>`` to its end, output captured as text: forked from ``zygotes`` unless None"""
    cmd = [sys.executable, str(path), *map(str, args)]
    if zygotes is not None and (proc := zygotes.run(cmd, cwd, timeout, env)) is not None:
        return proc
    return subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)


@pytest.fixture(scope="session")
def run_file(zygotes):
    """``run_file(path, *args, cwd=ROOT, timeout=300, env=None)``: ``python <path> <args>`` (a benchmark, say) run to
    its end as ``run`` runs a trainer, forked from a ``Zygotes`` server (~3.5 s less than a new interpreter that
    imports torch), with ``env`` (this process's environment by default); returns the ``CompletedProcess``."""

    def run(path, *args, cwd: Path = ROOT, timeout: float = 300, env: Optional[dict] = None):
        return _run_python(zygotes, Path(path), args, cwd, timeout, dict(os.environ if env is None else env))

    return run


@pytest.fixture(scope="session")
def trainer_help(zygotes):
    """``trainer_help(script)``: the ``--help`` text of ``scripts/<script>`` at 250 columns, with a bare environment
    (no terminal, ``PATH`` the system's), run once per session and script (forked from a ``Zygotes`` server) and
    shared by the tests that read it."""
    scripts = Path(__file__).resolve().parents[1] / "scripts"
    texts: dict[str, str] = {}

    def text(script: str) -> str:
        if script not in texts:
            env = {"COLUMNS": "250", "PATH": "/usr/bin:/bin"}
            proc = _run_python(zygotes, scripts / script, ["--help"], ROOT, 120, env)
            assert proc.returncode == 0, proc.stdout + proc.stderr
            texts[script] = proc.stdout
        return texts[script]

    return text


@pytest.fixture(scope="module")
def run_in_new_dir(tmp_path_factory, run, run_dir_of):
    """``run_in_new_dir(name, script, *args, **kwargs)``: ``run(script, *args, cwd=folder, **kwargs)`` in a new folder
    (``tmp_path_factory.mktemp(name)``), checked by ``run_dir_of``; returns ``(run_dir, proc)``. The training run
    that a test file's module-scoped fixture shares among its tests."""

    def train(name: str, script: str, *args: str, **kwargs) -> tuple[Path, subprocess.CompletedProcess]:
        folder = tmp_path_factory.mktemp(name)
        proc = run(script, *args, cwd=folder, **kwargs)
        return run_dir_of(proc, folder), proc

    return train


@pytest.fixture(scope="session")
def finished_run():
    """``finished_run(run_dir, stdout, name, steps, saves)``: checks what a trainer run of ``steps`` steps that saved
    checkpoints every few iterations left: its run dir, named ``<name>__1__<unix time>`` (``name``: the env id and
    the trainer's, 1: the seed), holding ``checkpoint.pt`` and ``checkpoint_<iteration>.pt`` of each iteration in
    ``saves``; and its stdout, with the last progress line (``step <steps>/<steps> | <n> SPS | ETA 0:00:00 | return
    ...``, numbers with thousands commas) and the profile's table (seconds and share of env, inference, train, other
    and total). Returns the names in the run dir."""

    def check(run_dir: Path, stdout: str, name: str, steps: int, saves: tuple[int, ...]) -> set[str]:
        assert re.fullmatch(rf"{re.escape(name)}__1__\d+", run_dir.name), run_dir.name
        names = {p.name for p in run_dir.iterdir()}
        assert {"checkpoint.pt", *(f"checkpoint_{i:06d}.pt" for i in saves)} <= names, names
        assert re.search(rf"step\s+{steps:,}/{steps:,} \|\s+[\d,]+ SPS \| ETA 0:00:00 \| return", stdout)
        for section in ("env", "inference", "train", "other", "total"):
            assert re.search(rf"^{section}\s+\d+\.\d+\s+\d+\.\d%", stdout, re.MULTILINE), section
        return names

    return check


@pytest.fixture(scope="module")
def evaluate_twice(run):
    """``evaluate_twice(checkpoint, episodes, min_return)``: evaluate.py on a trainer's ``checkpoint`` (in its folder),
    checked to play the greedy policy for ``episodes`` episodes with a mean return of at least ``min_return``, then
    the sampled policy for 3."""

    def check(checkpoint: Path, episodes: int, min_return: float) -> None:
        proc = run("evaluate.py", str(checkpoint), "--episodes", str(episodes), cwd=checkpoint.parent)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        match = re.search(r"return: ([\d.]+) ± ([\d.]+)", proc.stdout)
        assert match and float(match.group(1)) >= min_return, proc.stdout
        assert f"episodes: {episodes}" in proc.stdout and "greedy policy" in proc.stdout
        proc = run("evaluate.py", str(checkpoint), "--episodes", "3", "--sample", cwd=checkpoint.parent)
        assert proc.returncode == 0 and "sampled policy" in proc.stdout, proc.stderr

    return check


@pytest.fixture(scope="module")
def normalized_frames_run(run):
    """``normalized_frames_run(script, *args, cwd)``: ``script`` (a PPO Atari trainer) with ``args`` (2 envs x 16
    steps on Pong-v5) and ``--normalize-frames`` for 64 steps, checked to keep per-pixel statistics of the newest
    frames, from the reset's (2 envs) and each rollout's (2 x 16 per iteration), saved with the weights; evaluate.py
    normalizes with them; ``--resume`` to 96 steps counts on from them."""

    def check(script: str, *args: str, cwd: Path) -> None:
        from rlfast.algos.checkpoint import load_checkpoint

        proc = run(script, *args, "--total-timesteps", "64", "--normalize-frames", cwd=cwd)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        (run_dir,) = (cwd / "runs").iterdir()
        weights = load_checkpoint(run_dir / "checkpoint.pt")["models"]["agent"]
        assert weights["network.pixel_count"].item() == 2 + 2 * 32
        mean, var = weights["network.pixel_mean"], weights["network.pixel_var"]
        assert mean.shape == var.shape == (84, 84) and 0 < mean.mean() < 255
        assert (var == 0).any() and (var > 0).any()  # the still border, and what moves (the paddles, the ball)
        proc = run("evaluate.py", str(run_dir / "checkpoint.pt"), "--episodes", "1", cwd=run_dir)
        assert proc.returncode == 0 and "greedy policy" in proc.stdout, proc.stdout + proc.stderr
        proc = run(script, "--resume", str(run_dir / "checkpoint.pt"), "--total-timesteps", "96", cwd=cwd)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert load_checkpoint(run_dir / "checkpoint.pt")["models"]["agent"]["network.pixel_count"].item() == 2 + 3 * 32

    return check


@pytest.fixture(scope="module")
def learning_run(run):
    """``learning_run(script, *args, **kwargs)``: ``run(script, *args, **kwargs)`` of a test that trains to a return,
    timed and checked to end with status 0; returns ``(last, mean_return, seconds)``: its last progress line, the
    mean return over the last 20 episodes that line gives, and how long the run took."""

    def train(script: str, *args: str, **kwargs) -> tuple[str, float, float]:
        start = time.perf_counter()
        proc = run(script, *args, **kwargs)
        seconds = time.perf_counter() - start
        assert proc.returncode == 0, proc.stdout + proc.stderr
        last = [line for line in proc.stdout.splitlines() if line.startswith("step")][-1]
        return last, float(re.search(r"return\s+([\d.]+) \(last 20 ep\)", last).group(1)), seconds

    return train


@pytest.fixture(scope="session")
def exits_promptly():
    """``exits_promptly(code, timeout)``: runs ``code`` in a new interpreter (``python -c``), which exits with work
    in flight, and checks that it ends with status 0 (or 3: its ``raise SystemExit(3)``) within 60 s: a hang, not a
    slow start (start-up and exit take ~5 s, 18 s under heavy load, as importing torch beside another pytest worker);
    ``timeout`` bounds the hang. Returns its stderr."""

    def check(code: str, timeout: float) -> str:
        start = time.monotonic()
        proc = subprocess.run([sys.executable, "-c", code], timeout=timeout, capture_output=True, text=True)
        assert proc.returncode in (0, 3), proc.stderr
        assert time.monotonic() - start < 60
        return proc.stderr

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
