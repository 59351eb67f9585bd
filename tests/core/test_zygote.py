"""The tests' fork server (tests/zygote.py, ``Zygotes`` in tests/conftest.py) gives a script what a new interpreter
would: its arguments, folder, environment, SIGINT's handler, ``__main__``, output, exit status and exit handlers;
a run past its timeout is killed and raises as ``subprocess.run`` does."""

import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

PROBE = textwrap.dedent("""
    import atexit, json, os, signal, sys
    print(json.dumps({"sigint": repr(signal.getsignal(signal.SIGINT)),
                      "argv": sys.argv, "cwd": os.getcwd(), "name": __name__, "file": __file__,
                      "path0": sys.path[0], "var": os.environ.get("ZYGOTE_PROBE"), "stdin": sys.stdin.read(),
                      "main": sys.modules["__main__"].__dict__ is globals()}), flush=True)
    print("on stderr", file=sys.stderr)
    mode = sys.argv[1]
    if mode == "raise":
        raise ValueError("the probe failed")
    if mode == "exit":
        sys.exit("usage: a bad flag")
    if mode == "code":
        sys.exit(3)
    if mode == "kill":
        os.kill(os.getpid(), 9)
    if mode == "atexit":
        atexit.register(lambda: print("atexit ran", flush=True))
    if mode == "sleep":
        import time
        print(os.getpid(), flush=True)
        time.sleep(120)
""")


@pytest.fixture
def servers(zygotes):
    if zygotes is None:
        pytest.skip("RLFAST_TEST_ZYGOTE=0: no fork server in this session")
    return zygotes


@pytest.mark.parametrize("mode", ["ok", "raise", "exit", "code", "kill", "atexit"])
def test_a_forked_run_is_a_new_interpreters_run(servers, tmp_path, mode):
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    cmd = [sys.executable, str(script), mode]
    env = {**os.environ, "ZYGOTE_PROBE": "seen"}
    forked = servers.run(cmd, tmp_path, 60, env)
    plain = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert forked is not None, "no fork server: see the warning"
    assert (forked.returncode, forked.stdout) == (plain.returncode, plain.stdout)
    facts = json.loads(forked.stdout.splitlines()[0])
    facts.pop("sigint")  # Python's handler, or ignored as this pytest's is: equal to the new interpreter's (above)
    assert facts == {"argv": [str(script), mode], "cwd": str(tmp_path), "name": "__main__", "file": str(script),
                     "path0": str(tmp_path), "var": "seen", "stdin": "", "main": True}  # fmt: skip
    assert forked.stderr.startswith("on stderr") and plain.stderr.startswith("on stderr")
    assert forked.stderr.splitlines()[-1] == plain.stderr.splitlines()[-1]  # the traceback's last line, the message
    assert ("atexit ran" in forked.stdout) == (mode == "atexit")


def test_a_run_past_its_timeout_is_killed_and_raises(servers, tmp_path):
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    start = time.monotonic()
    with pytest.raises(subprocess.TimeoutExpired) as timed_out:
        servers.run([sys.executable, str(script), "sleep"], tmp_path, 3, dict(os.environ))
    assert time.monotonic() - start < 30
    pid = int(timed_out.value.output.splitlines()[-1])
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # killed and reaped by the server
    proc = servers.run([sys.executable, str(script), "ok"], tmp_path, 60, dict(os.environ))
    assert proc.returncode == 0  # the server goes on


def test_a_variable_read_after_loading_reaches_the_run_from_the_same_server(servers, tmp_path):
    """MPLCONFIGDIR (tests/zygote.py's READ_AFTER_LOAD) does not pick a server: the run's own value reaches
    matplotlib, which the child loads."""
    script = tmp_path / "probe.py"
    script.write_text("import matplotlib\nprint(matplotlib.get_configdir())\n")
    seen, used = [], []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        env = {**os.environ, "MPLCONFIGDIR": str(tmp_path / name)}
        proc = servers.run([sys.executable, str(script)], tmp_path, 60, env)
        assert proc is not None and proc.returncode == 0, proc and proc.stderr
        seen.append(proc.stdout.strip())
        used.append(servers.server(env))
    assert seen == [str(tmp_path / "a"), str(tmp_path / "b")]
    assert used[0] is used[1]


def test_a_server_that_loaded_a_reader_of_those_variables_refuses(tmp_path):
    """Were a module of READ_AFTER_LOAD loaded with the scripts' imports, its variables would come from the
    server's environment: the server says so instead of serving (the fixture then starts plain interpreters)."""
    (tmp_path / "sitecustomize.py").write_text("import sys, types\nsys.modules['matplotlib'] = types.ModuleType('m')\n")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run([sys.executable, os.path.join(root, "tests", "zygote.py")], input=b"", capture_output=True,
                          env=env, timeout=300)  # fmt: skip
    reply = json.loads(proc.stdout.splitlines()[0])
    assert reply["ready"] is False and "['matplotlib']" in reply["why"], reply
