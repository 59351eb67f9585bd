"""A fork server for the tests' trainer runs: imports what ``scripts/`` imports once, then forks a child per run.

Most of the suite's time is trainers started by the ``run`` fixture (tests/conftest.py), and ~3 of the ~3.5 s a
trainer needs before its first step is importing torch, tensorboard, gymnasium and rlfast. This process imports
them once (rlfast first, as the scripts do) and, for each request, forks a child that becomes
``python scripts/<script> <args>``: a new ``__main__`` module run from the file, ``sys.argv``, ``sys.path[0]``,
the working folder and the environment set as a new interpreter would have them, stdin from /dev/null, stdout and
stderr into the files the request names. The child ends as a script does (its exit status; an uncaught exception
prints its traceback and gives 1), through the interpreter's normal exit (atexit handlers, non-daemon threads).

What a fork cannot give, and how the fixture keeps it out: variables read when a library loads (libgomp's
``OMP_*``/``GOMP_*``, ``ATEN_CPU_CAPABILITY``, ``PYTHONPATH``, ...) come from this process's environment, so the
fixture keeps one server per distinct environment and sends each run to the server started with the run's
environment. Only ``READ_AFTER_LOAD``'s variables are left out of that comparison: each is read by a module
this server does not load (it checks so once loaded), so a child, which loads it, reads the run's own value.
A fork of a process with threads is unsafe (torch's OpenMP pool among them): this server checks it is
single-threaded at a fork once loaded and says so, and the fixture then starts plain subprocesses instead.

Protocol, JSON lines over stdin/stdout: the server sends ``{"ready": true}`` (or ``{"ready": false, "why": ...}``)
once loaded; each request ``{"script", "args", "cwd", "env", "out", "err"}`` is answered with ``{"pid": n}``
when the child is started and ``{"status": code}`` when it has ended (``-N``: killed by signal N). The server
ends when its stdin closes.
"""

import ast
import builtins
import gc
import importlib
import importlib.machinery
import json
import os
import signal
import sys
import tempfile
import threading
import types
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
READ_AFTER_LOAD = {
    "TORCHINDUCTOR_CACHE_DIR": "torch._inductor",  # set by torch.compile in the tests' own process
    "MPLBACKEND": "matplotlib", "MPLCONFIGDIR": "matplotlib",  # set by importing envpool there
    "MUJOCO_GL": "mujoco", "PYOPENGL_PLATFORM": "OpenGL",  # as rlfast.render draws its first frame (it, mujoco)
    "WANDB_MODE": "wandb",  # by the tests of --track
    "PYGAME_HIDE_SUPPORT_PROMPT": "pygame",  # by importing gymnasium
}  # fmt: skip
"""variables (and the module that reads them as it loads) that the tests' process picks up as it goes, and that
no module this server loads reads: the fixture leaves them out when it matches a run to a server"""


def script_imports(folder: Path) -> list[str]:
    """the modules the files of ``folder`` import at their top level, in the order first met (``rlfast`` first)"""
    names = ["rlfast"]
    for path in sorted(folder.glob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Import):
                found = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found = [node.module]
            else:
                continue
            names += [name for name in found if name not in names]
    return names


def preload(names: list[str]) -> None:
    """imports ``names`` that exist here (a script's optional dependency may not; its own run then says so)"""
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def threads() -> int:
    """this process's threads (the kernel's count where it has one)"""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:
        return threading.active_count()


def threads_at_fork() -> int:
    """this process's threads once a fork's handlers have run: OpenBLAS (numpy's) starts a thread pool as it loads
    and stops it before each fork (its at-fork handler), so a throwaway fork shows what a child's fork meets"""
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return threads()


def send(fd: int, message: dict) -> None:
    os.write(fd, (json.dumps(message) + "\n").encode())


def become_script(request: dict, preload_err: bytes, added_env: dict, on_sigint) -> None:
    """in the forked child: set the process up as ``python <script> <args>`` and run the script as ``__main__``
    (``on_sigint``: SIGINT's handler as this server found it, ignored or Python's)"""
    signal.signal(signal.SIGINT, on_sigint)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    for fd, path in ((1, request["out"]), (2, request["err"])):
        opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(opened, fd)
        os.close(opened)
    os.write(2, preload_err)  # what importing these modules printed, as the script's own imports would have
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update({**request["env"], **added_env})
    script = request["script"]
    sys.argv = [script, *request["args"]]
    sys.path[0] = os.path.dirname(os.path.abspath(script))
    main = types.ModuleType("__main__")
    main.__file__, main.__builtins__, main.__cached__ = script, builtins, None
    main.__loader__ = importlib.machinery.SourceFileLoader("__main__", script)
    sys.modules["__main__"] = main
    with open(script, "rb") as file:
        code = compile(file.read(), script, "exec")
    exec(code, main.__dict__)


def serve() -> None:
    # Ctrl-C on pytest reaches its whole process group: the runs then stop as trainers do, and this server waits
    # for the end of its stdin (the pytest worker's exit) instead of dying with a traceback.
    on_sigint = signal.signal(signal.SIGINT, signal.SIG_IGN)
    requests, replies = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)  # a stray print while loading goes to stderr, not into the replies
    sys.path[0] = str(SCRIPTS)  # as for `python scripts/<script>` (not this file's folder, tests/)
    env_before = dict(os.environ)
    with tempfile.TemporaryFile() as caught:  # what loading prints on stderr, replayed in each child
        saved = os.dup(2)
        os.dup2(caught.fileno(), 2)
        try:
            preload(script_imports(SCRIPTS))
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        caught.seek(0)
        preload_err = caught.read()
    added_env = {k: v for k, v in os.environ.items() if env_before.get(k) != v}  # rlfast's GOMP_SPINCOUNT
    if loaded := sorted({m for m in READ_AFTER_LOAD.values() if m in sys.modules}):
        why = f"loading the scripts' imports loaded {loaded}: a child would not read their variables (READ_AFTER_LOAD)"
        send(replies, {"ready": False, "why": why})
        return
    if (count := threads_at_fork()) != 1:
        send(replies, {"ready": False, "why": f"{count} threads at a fork after loading: a fork would not be safe"})
        return
    gc.freeze()  # what is loaded now is never collected: a child's collections then copy none of it (copy on write)
    send(replies, {"ready": True})
    pending = b""
    while True:
        while b"\n" not in pending:
            chunk = os.read(requests, 65536)
            if not chunk:
                return
            pending += chunk
        line, pending = pending.split(b"\n", 1)
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            os.close(requests)
            os.close(replies)
            become_script(request, preload_err, added_env, on_sigint)
            raise SystemExit(0)  # the script's end: exits through the interpreter, as `python script.py` does
        send(replies, {"pid": pid})
        _, status = os.waitpid(pid, 0)
        send(replies, {"status": os.waitstatus_to_exitcode(status)})


if __name__ == "__main__":
    serve()
