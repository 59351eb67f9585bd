"""C++ envs without rebuilding rlfast: ``rlfast.load_env("my_env.h", "MyEnv-v0")``.

The header defines an env class in the engine's contract (``rlfast/csrc/core/env.h``; a template:
``examples/gridworld.h``). ``load_env`` writes a one-line module around it
(``rlfast/csrc/python/loaded_env.h``: the engine's own pool binding), compiles it with the engine's pool
sources against the headers installed with rlfast, imports it and registers the task in ``rlfast/registry.py``,
so that ``rlfast.make("MyEnv-v0", ...)`` and every trainer's ``--env-id`` take it.
``--env-id path/to/my_env.h:MyEnv-v0`` (``rlfast.make`` too) loads and makes in one go.

Builds are cached by a hash of everything that goes into them (the header, the class and task names, the
engine's sources, the compiler and Python), in ``$RLFAST_CACHE/envs`` (default ``~/.cache/rlfast/envs``). The
generated module and the engine's pool source compile at once; the latter's object is cached too and serves
every header while the engine and the compiler stay the same (the next header compiles only its module). A
header that does not compile raises ``EnvCompileError`` with the compiler's output, which names the file and
line; so does a machine without a C++ compiler or Python's headers, naming what to install (nothing else in
rlfast needs them).
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import inspect
import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any, Optional

from rlfast import registry
from rlfast.pool import EnvPool, pool_config

ROOT = Path(__file__).resolve().parent.parent
"""the folder holding ``rlfast/csrc`` (the package's parent: a source tree or site-packages)"""
ENGINE_SOURCES = ("rlfast/csrc/core/pool.cc",)
"""the engine's non-template code a loaded env's pool needs"""


class EnvCompileError(RuntimeError):
    """A header given to ``load_env`` did not compile; the message holds the compiler's output."""


def class_name_of(task_id: str) -> str:
    """The env class a task id names by default: ``"MyEnv-v0"`` -> ``MyEnv``."""
    base = re.sub(r"-v\d+$", "", task_id)
    return re.sub(r"\W", "", base)


def load_env(header: str, task_id: str, class_name: Optional[str] = None, verbose: bool = False) -> str:
    """Compiles (or takes from the cache) the env ``class_name`` (default: ``task_id`` without its version,
    e.g. ``GridWorld`` for ``"GridWorld-v0"``; a qualified name like ``my_ns::GridWorld`` works) of ``header``
    and registers it as ``task_id``. Returns ``task_id``. Raises ``EnvCompileError`` with the compiler's
    output if it does not compile, FileNotFoundError if the header is missing, ValueError if ``task_id``
    is an engine task or already loaded from another header."""
    path = Path(header).expanduser().resolve()
    if not path.is_file():
        raise FileNotFoundError(f"no env header at {header!r}")
    if registry.is_builtin(task_id):
        raise ValueError(f"{task_id!r} is one of rlfast's own tasks; give your env another id")
    cls = class_name or class_name_of(task_id)
    if not re.fullmatch(r"[A-Za-z_]\w*(::[A-Za-z_]\w*)*", cls):
        raise ValueError(f"class_name must be a C++ class name, got {cls!r}")
    bind = f"rlfast::python::BindLoadedEnv<{cls}>(m, {_cpp_string(task_id)});"
    source = (f'#include "{path}"\n#include "rlfast/csrc/python/loaded_env.h"\n'
              f"PYBIND11_MODULE(MODULE_NAME, m) {{ {bind} }}\n")
    digest = _digest(source, path)
    name = f"rlfast_env_{digest[:20]}"
    previous = registry.loaded(task_id)
    if previous is not None and previous.__name__ != name:
        raise ValueError(f"{task_id!r} is already loaded from another header or version of it")
    if previous is None:
        registry.register(task_id, _import(name, _build(name, source, verbose)))
    return task_id


def _cpp_string(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def cache_dir() -> Path:
    return Path(os.environ.get("RLFAST_CACHE", Path.home() / ".cache" / "rlfast")) / "envs"


def _compiler() -> str:
    """The C++ compiler ``load_env`` builds with: ``$CXX``, else ``c++`` or ``g++`` on the PATH. Raises
    ``EnvCompileError`` naming what is missing when there is none (rlfast's wheel installs and runs without a
    compiler: ``load_env`` is the one thing that needs one), or when the Python headers are missing."""
    cxx = os.environ.get("CXX")
    if cxx:
        if shutil.which(cxx) is None:
            raise EnvCompileError(f"rlfast.load_env compiles env headers with $CXX={cxx!r}, which is not a program "
                                  "on this machine: set CXX to a C++17 compiler, or unset it to use c++ or g++")
        found = cxx
    else:
        found = shutil.which("c++") or shutil.which("g++")
        if found is None:
            raise EnvCompileError("rlfast.load_env compiles env headers with a C++17 compiler, and this machine has "
                                  "none: no c++ or g++ on the PATH and no $CXX. Install one (Debian/Ubuntu: apt-get "
                                  "install g++) or set CXX; the rest of rlfast needs no compiler")
    include = sysconfig.get_paths()["include"]
    if not os.path.isfile(os.path.join(include, "Python.h")):
        raise EnvCompileError(f"rlfast.load_env compiles env headers against Python's own headers, and {include} "
                              f"has no Python.h: install them (Debian/Ubuntu: apt-get install "
                              f"python{sys.version_info.major}.{sys.version_info.minor}-dev)")
    return found


COMPILE = ["-std=c++17", "-O2", "-fPIC", "-fvisibility=hidden", "-pthread"]
# --exclude-libs: where the compiler links libstdc++ statically, its symbols stay inside the module instead of
# binding to the libstdc++ torch loads globally (two versions' locale data crashed a stream read; setup.py).
LINK = ["-shared", "-pthread", "-Wl,--exclude-libs,ALL"]
FLAGS = COMPILE + LINK


@functools.lru_cache(maxsize=None)
def _compiler_version(cxx: str) -> str:
    """``cxx --version``, asked once per compiler and process (the digest and the engine object both hash it)."""
    return subprocess.run([cxx, "--version"], capture_output=True, text=True).stdout


def _digest(source: str, header: Path) -> str:
    """A hash of everything the build depends on: the generated source, the user's header (and the headers
    next to it), the engine's headers and sources, pybind11's version, the compiler, its flags and this Python."""
    import pybind11

    h = hashlib.sha256(source.encode())
    files = sorted(header.parent.glob("*.h*")) + sorted((ROOT / "rlfast" / "csrc").rglob("*.h"))
    files += [ROOT / s for s in ENGINE_SOURCES]
    for f in files:
        h.update(str(f).encode())
        h.update(f.read_bytes())
    version = _compiler_version(_compiler())
    h.update(f"{pybind11.__version__}|{version}|{sys.version}|{sysconfig.get_config_var('EXT_SUFFIX')}".encode())
    h.update(" ".join(FLAGS).encode())
    return h.hexdigest()


def _engine_object(cxx: str) -> Path:
    """Where the engine's pool sources compiled alone go in the cache: one object for every header, as long as
    the engine's sources and headers, the compiler and its flags stay the same (it includes no Python)."""
    h = hashlib.sha256()
    for f in sorted((ROOT / "rlfast" / "csrc").rglob("*.h")) + [ROOT / s for s in ENGINE_SOURCES]:
        h.update(str(f.relative_to(ROOT)).encode())
        h.update(f.read_bytes())
    h.update(f"{_compiler_version(cxx)}|{' '.join(COMPILE)}".encode())
    return cache_dir() / f"engine_{h.hexdigest()[:20]}.o"


def _build(name: str, source: str, verbose: bool) -> Path:
    """The compiled module's path: from the cache, or built into it now (atomically, so concurrent loads of
    the same env do not see a half-written file). The generated source and the engine's pool source compile
    at once, the latter only when the cache has no object of it yet (``_engine_object``), then link."""
    import pybind11

    out = cache_dir() / f"{name}{sysconfig.get_config_var('EXT_SUFFIX')}"
    if out.is_file():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    cxx = _compiler()
    engine = _engine_object(cxx)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        main = Path(tmp) / f"{name}.cc"
        main.write_text(source)
        include = [f"-I{ROOT}", f"-I{pybind11.get_include()}", f"-I{sysconfig.get_paths()['include']}"]
        steps = {main: [cxx, *COMPILE, f"-DMODULE_NAME={name}", *include, "-c", str(main), "-o", f"{main}.o"]}
        if not engine.is_file():
            (source_file,) = ENGINE_SOURCES
            steps[engine] = [cxx, *COMPILE, f"-I{ROOT}", "-c", str(ROOT / source_file), "-o", f"{tmp}/{engine.name}"]
        procs: dict[Path, subprocess.Popen] = {}
        try:
            for key, cmd in steps.items():
                if verbose:
                    print(" ".join(cmd), flush=True)
                # Each compile in a process group of its own, so that on Ctrl-C the driver and what it runs
                # (cc1plus, as) go at once, not the driver alone.
                procs[key] = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                              process_group=0)  # fmt: skip
            errors = {key: proc.communicate()[1] for key, proc in procs.items()}
        except BaseException:  # Ctrl-C: no compiler is left running
            for proc in procs.values():
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait()
            raise
        if engine in procs and procs[engine].returncode == 0:
            os.replace(f"{tmp}/{engine.name}", engine)  # kept even when the env's own source did not compile
        for key, proc in procs.items():
            if proc.returncode != 0:
                raise EnvCompileError(f"the env does not compile ({cxx} exited with {proc.returncode}):\n"
                                      f"{errors[key].strip()}")  # fmt: skip
        target = Path(tmp) / out.name
        cmd = [cxx, *LINK, f"{main}.o", str(engine), "-o", str(target)]
        if verbose:
            print(" ".join(cmd), flush=True)
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise EnvCompileError(f"the env does not link ({cxx} exited with {proc.returncode}):\n"
                                  f"{proc.stderr.strip()}")  # fmt: skip
        os.replace(target, out)
    return out


def _import(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_loaded(task_id: str, num_envs: int, **kwargs: Any) -> EnvPool:
    """``rlfast.make`` for a task ``load_env`` registered: an ``EnvPool`` over the loaded module's pool. ``kwargs``:
    ``pool_config``'s options (``EnvPool``'s), the rest the env's own."""
    module = registry.loaded(task_id)
    if module is None:
        raise ValueError(f"{task_id!r} is no task rlfast.load_env registered")
    options = {k: kwargs.pop(k) for k in inspect.signature(pool_config).parameters if k in kwargs}
    config, pin = pool_config(num_envs, **options)
    names = ("num_envs", "batch_size", "num_threads", "work_in_recv", "seed", "seeds", "max_episode_steps",
             "same_step_autoreset", "thread_affinity_offset")
    fields = {k: getattr(config, k) for k in names}
    autoreset_mode = options.get("autoreset_mode", "next_step")
    return EnvPool.from_binding(module.make(fields, dict(kwargs)), task_id, kwargs, autoreset_mode, pin)
