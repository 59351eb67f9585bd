"""rlfast.load_env: a C++ env header compiled against the installed engine at run time (rlfast/loader.py)."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import rlfast
from rlfast import loader, registry

ROOT = Path(__file__).resolve().parents[2]
GRIDWORLD = ROOT / "examples" / "gridworld.h"


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One build cache for this module's tests (a build takes ~10-20 s), also for the subprocesses."""
    path = tmp_path_factory.mktemp("rlfast_cache")
    previous = os.environ.get("RLFAST_CACHE")
    os.environ["RLFAST_CACHE"] = str(path)
    rlfast.load_env(str(GRIDWORLD), "GridWorld-v0")
    yield path
    if previous is None:
        del os.environ["RLFAST_CACHE"]
    else:
        os.environ["RLFAST_CACHE"] = previous


def rollout(pool, steps, seed):
    rng = np.random.default_rng(seed)
    pool.async_reset()
    out = []
    for _ in range(steps):
        obs, reward, term, trunc, info = pool.recv()
        ids = info["env_id"].clone()
        out.append((ids.numpy().copy(), obs.numpy().copy(), reward.numpy().copy(), term.numpy().copy()))
        pool.send(rng.integers(0, 4, len(ids)), ids)
    return out


@pytest.mark.wheel
def test_gridworld_steps_in_an_async_pool_and_follows_its_seeds(cache):
    assert "GridWorld-v0" in rlfast.list_envs() and rlfast.task_family("GridWorld-v0") == "custom"
    with rlfast.make("GridWorld-v0", 8, batch_size=4, seed=3, size=4, slip=0.1) as pool:
        assert pool.single_observation_space.shape == (4,) and pool.single_action_space.n == 4
        steps = rollout(pool, 200, seed=0)
    seen = np.unique(np.concatenate([s[0] for s in steps]))
    np.testing.assert_array_equal(seen, np.arange(8))
    assert sum(int(s[3].sum()) for s in steps) > 0  # some envs reached the goal
    for ids, obs, reward, term in steps:
        np.testing.assert_array_equal(reward[term], 1.0)  # +1 exactly at the goal, -0.01 elsewhere
        assert ((reward == 1.0) | np.isclose(reward, -0.01) | (reward == 0.0)).all()
        assert ((obs[:, :2] * 3) == np.round(obs[:, :2] * 3)).all()  # cells of a 4 x 4 grid
    # Same seeds and actions, same results (sync pools: every batch in env order).
    with rlfast.make("GridWorld-v0", 8, batch_size=8, seed=3, size=4, slip=0.1) as a, \
         rlfast.make("GridWorld-v0", 8, batch_size=8, seed=3, size=4, slip=0.1) as b:  # fmt: skip
        ra, rb = rollout(a, 50, seed=1), rollout(b, 50, seed=1)
    for (ia, oa, _, _), (ib, ob, _, _) in zip(ra, rb):
        np.testing.assert_array_equal(ia, ib)
        np.testing.assert_array_equal(oa, ob)


def test_options_are_checked_like_built_in_envs(cache):
    with pytest.raises(ValueError, match="unknown option 'sizes' for GridWorld-v0; its options are: max_steps, size"):
        rlfast.make("GridWorld-v0", 2, sizes=3)
    with pytest.raises(ValueError, match="size must be >= 2"):
        rlfast.make("GridWorld-v0", 2, size=1)
    with pytest.raises(ValueError, match="one of rlfast's own tasks"):
        rlfast.load_env(str(GRIDWORLD), "CartPole-v1", class_name="GridWorld")


def test_second_load_takes_the_cached_build(cache):
    builds = sorted((cache / "envs").glob("rlfast_env_*"))
    stamps = [p.stat().st_mtime_ns for p in builds]
    del registry._LOADED["GridWorld-v0"]
    rlfast.load_env(str(GRIDWORLD), "GridWorld-v0")
    assert sorted((cache / "envs").glob("rlfast_env_*")) == builds
    assert [p.stat().st_mtime_ns for p in builds] == stamps


@pytest.mark.wheel
def test_compile_errors_name_the_users_file_and_line(cache, tmp_path):
    bad = tmp_path / "broken_env.h"
    bad.write_text(GRIDWORLD.read_text().replace("r.terminated = x_ == last && y_ == last;",
                                                 "r.terminated = x_ == last && y_ == undefined_name;"))  # fmt: skip
    line = next(i for i, t in enumerate(bad.read_text().splitlines(), 1) if "undefined_name" in t)
    engine = {p: p.stat().st_mtime_ns for p in (cache / "envs").glob("engine_*.o")}
    assert len(engine) == 1  # the engine's pool source, compiled once beside GridWorld's module
    with pytest.raises(loader.EnvCompileError, match=rf"broken_env\.h:{line}:\d+: error: .*undefined_name"):
        rlfast.load_env(str(bad), "Broken-v0", class_name="GridWorld")
    assert {p: p.stat().st_mtime_ns for p in (cache / "envs").glob("engine_*.o")} == engine  # taken, not rebuilt
    with pytest.raises(FileNotFoundError, match="no env header"):
        rlfast.load_env(str(tmp_path / "missing.h"), "Missing-v0")


@pytest.mark.wheel
def test_without_a_compiler_load_env_says_what_to_install(tmp_path, monkeypatch):
    """rlfast's wheel needs no compiler but load_env does: a machine without one gets an EnvCompileError saying so
    (not a FileNotFoundError from deep inside subprocess); a $CXX that is no program and missing Python headers are
    named too."""
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))  # an empty folder: no c++, no g++
    monkeypatch.setenv("RLFAST_CACHE", str(tmp_path / "cache"))
    with pytest.raises(loader.EnvCompileError, match=r"C\+\+17 compiler, and this machine has none.*install g\+\+"):
        rlfast.load_env(str(GRIDWORLD), "NoCompiler-v0", class_name="GridWorld")
    monkeypatch.setenv("CXX", str(tmp_path / "clang++"))
    with pytest.raises(loader.EnvCompileError, match=r"\$CXX='.*clang\+\+', which is not a program"):
        rlfast.load_env(str(GRIDWORLD), "NoCompiler-v0", class_name="GridWorld")
    monkeypatch.setenv("CXX", sys.executable)  # a program, standing in for a compiler: the headers are checked next
    monkeypatch.setattr(loader.sysconfig, "get_paths", lambda: {"include": str(tmp_path)})
    with pytest.raises(loader.EnvCompileError, match=r"has no Python\.h: install them .*python3\.\d+-dev"):
        rlfast.load_env(str(GRIDWORLD), "NoCompiler-v0", class_name="GridWorld")
    assert registry.loaded("NoCompiler-v0") is None


def test_ppo_trains_the_header_env_by_its_path(cache, tmp_path):
    cmd = [sys.executable, str(ROOT / "scripts" / "ppo.py"), "--env-id", f"{GRIDWORLD}:GridWorld-v0",
           "--num-envs", "4", "--num-steps", "32", "--total-timesteps", "512", "--no-cuda", "--torch-threads", "1",
           "--runs-dir", "runs"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert "GridWorld-v0__ppo__1__" in run_dir.name


def _descendants(pid: int) -> set[int]:
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found, todo = set(), [pid]
    while todo:
        kids = [p for p, parent in parents.items() if parent == todo[-1]]
        todo.pop()
        found.update(kids)
        todo += kids
    return found


def _comm(pid: int) -> str:
    try:
        return (Path("/proc") / str(pid) / "comm").read_text().strip()
    except OSError:
        return ""


def _running(pid: int) -> bool:
    """Whether ``pid`` is a process still running (a zombie waiting for its parent to reap it is not)."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_ctrl_c_during_a_compile_leaves_no_compiler_running(tmp_path):
    """SIGINT to the Python process alone (as ``kill -INT`` sends it; a terminal's Ctrl-C reaches the whole
    foreground group) while load_env compiles: KeyboardInterrupt, and the compilers it started (their drivers
    and the cc1plus each runs) are gone with it rather than left to finish on their own."""
    # Python's own SIGINT handler, as in a terminal: a child of a pytest started with SIGINT ignored (xdist's
    # workers, a background job) would inherit the ignore and never see the signal.
    code = ("import signal; signal.signal(signal.SIGINT, signal.default_int_handler); import rlfast; "
            f"rlfast.load_env({str(GRIDWORLD)!r}, 'GridWorld-v0')")
    env = {**os.environ, "RLFAST_CACHE": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.PIPE, text=True)
    kids: set[int] = set()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        kids = _descendants(proc.pid)
        if sum(_comm(k) == "cc1plus" for k in kids) == 2:  # the env's module and the engine's pool source
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the compile ended before it could be interrupted"
    assert sum(_comm(k) == "cc1plus" for k in kids) == 2, [_comm(k) for k in kids]
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "KeyboardInterrupt" in err, err[-2000:]
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_running(k) for k in kids):
        time.sleep(0.05)
    assert not [_comm(k) for k in kids if _running(k)]
    assert not list((tmp_path / "envs").glob("*.so")) and not list((tmp_path / "envs").glob("engine_*.o"))
