"""Checkpoints every trainer writes the same way, so ``scripts/evaluate.py`` reads them all.

One ``torch.save``d dict, loadable with ``weights_only=True``::

    format       1
    script       "ppo.py": evaluate.py imports scripts/<script>, a ``TrainerScript`` (rlfast/algos/contract.py)
    env_id       task id for rlfast.make; env_kwargs: its other keywords (no num_envs/seed)
    eval_env_kwargs   the keywords to evaluate with (e.g. whole games, raw scores); default env_kwargs
    args         the trainer's Args as a plain dict (``dataclasses.asdict``)
    global_step, iteration   progress when saved (iteration = completed iterations)
    models       {"agent": state_dict, ...}
    optimizers   {"optimizer": state_dict, ...}
    normalizers  {"obs": ObsNormalizer.state_dict(), ...} ({} when none)
    rng          torch (CPU + every CUDA device), numpy legacy global, python ``random``
    world_size, best_eval   ranks under torchrun (1: one process); the highest eval/episodic_return so far
                 (None: no --eval-every evaluation yet), the one run_dir/best.pt was saved at
    policy_only  true in a file of ``policy_only`` (``evaluate.py --save-policy``): one model, nothing to resume
    crc32        CRC-32 of all of the above (``checksum``), checked when loaded: torch's loader reads bytes
                 changed inside a tensor's data without complaint

Writes are atomic (temp file in the same folder + ``os.replace``): a crash or Ctrl-C while
saving leaves the previous checkpoint intact; the file gets the permissions of any new file
(0666 less the umask), like the run's other files. ``CheckpointSchedule`` says when a trainer
saves during a run, so that a crash (even SIGKILL) loses at most ``save_minutes`` of training.

The contract between a trainer and ``scripts/evaluate.py`` (``TrainerScript``, ``Policy``) is in
``rlfast/algos/contract.py``.
"""

import os
import random
import secrets
import time
import zlib
from pathlib import Path
from typing import Any, Callable, Mapping, Optional, Union

import numpy as np
import torch

FORMAT = 1
PathLike = Union[str, "os.PathLike[str]"]


def rng_state() -> dict[str, Any]:
    """The torch, numpy and python global RNG states, as weights_only-loadable values."""
    np_state = np.random.get_state()
    py_version, py_internal, py_gauss = random.getstate()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "numpy": {
            "keys": torch.from_numpy(np_state[1].astype(np.int64)),
            "pos": int(np_state[2]),
            "has_gauss": int(np_state[3]),
            "cached_gaussian": float(np_state[4]),
        },
        "python": {"version": py_version, "internal": list(py_internal), "gauss_next": py_gauss},
    }


def set_rng_state(state: Mapping[str, Any]) -> None:
    """Restores what ``rng_state`` captured (CUDA states only where the devices exist)."""
    torch.set_rng_state(state["torch"].cpu())
    if state.get("cuda") and torch.cuda.is_available():
        cuda = [s.cpu() for s in state["cuda"]][: torch.cuda.device_count()]
        for i, s in enumerate(cuda):
            torch.cuda.set_rng_state(s, i)
    n = state["numpy"]
    keys = n["keys"].numpy().astype(np.uint32)
    np.random.set_state(("MT19937", keys, n["pos"], n["has_gauss"], n["cached_gaussian"]))
    p = state["python"]
    random.setstate((p["version"], tuple(p["internal"]), p["gauss_next"]))


def make_checkpoint(
    *,
    script: str,
    env_id: str,
    args: Mapping[str, Any],
    global_step: int,
    iteration: int,
    models: Mapping[str, torch.nn.Module],
    optimizers: Optional[Mapping[str, torch.optim.Optimizer]] = None,
    normalizers: Optional[Mapping[str, Any]] = None,
    env_kwargs: Optional[Mapping[str, Any]] = None,
    eval_env_kwargs: Optional[Mapping[str, Any]] = None,
) -> dict[str, Any]:
    """Collects a trainer's state into the checkpoint dict (see the module docstring)."""
    return {
        "format": FORMAT,
        "script": script,
        "env_id": env_id,
        "env_kwargs": dict(env_kwargs or {}),
        "eval_env_kwargs": dict(env_kwargs or {} if eval_env_kwargs is None else eval_env_kwargs),
        "args": dict(args),
        "global_step": int(global_step),
        "iteration": int(iteration),
        "models": {k: _unwrap(m).state_dict() for k, m in models.items()},
        "optimizers": {k: o.state_dict() for k, o in (optimizers or {}).items()},
        "normalizers": {k: n.state_dict() for k, n in (normalizers or {}).items()},
        "rng": rng_state(),
    }


def checksum(state: Any) -> int:
    """CRC-32 of everything in ``state`` (nested dicts, lists and tuples of tensors and plain values, in order):
    ``save_checkpoint`` stores it as ``crc32`` and ``verify`` checks it, since torch's loader reads bytes changed
    inside a tensor's data without complaint."""
    crc = 0
    todo = [state]
    while todo:
        item = todo.pop()
        if isinstance(item, Mapping):
            for key in item:
                crc = zlib.crc32(repr(key).encode(), crc)
            todo += reversed(list(item.values()))
        elif isinstance(item, (list, tuple)):
            todo += reversed(item)
        elif isinstance(item, torch.Tensor):
            data = item.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy()
            crc = zlib.crc32(data, zlib.crc32(f"{item.dtype}{tuple(item.shape)}".encode(), crc))
        else:
            crc = zlib.crc32(repr(item).encode(), crc)
    return crc


def verify(state: Mapping[str, Any], path: PathLike) -> None:
    """ValueError naming ``path`` if ``state`` (as loaded) does not match the ``crc32`` it was saved with (files
    written before checksums carry none: nothing to check)."""
    if "crc32" not in state:
        return
    rest = {k: v for k, v in state.items() if k != "crc32"}
    if checksum(rest) != state["crc32"]:
        raise ValueError(f"{path} is corrupt: its contents do not match the checksum it was saved with")


def save_checkpoint(path: PathLike, checkpoint: Mapping[str, Any]) -> Path:
    """Writes ``checkpoint`` (with its ``crc32``) to ``path`` atomically; returns the path."""
    path = Path(path)
    checkpoint = {k: v for k, v in checkpoint.items() if k != "crc32"}
    checkpoint["crc32"] = checksum(checkpoint)
    path.parent.mkdir(parents=True, exist_ok=True)
    # The temporary file's name is chosen before it is created, so that an interrupt at any moment, even one between
    # its creation and the ``try`` (where tempfile.mkstemp would leave it, unnamed to the handler), is cleaned up.
    # os.open's mode is the run's files' (0666 less the umask), not mkstemp's private 0600.
    tmp = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
        with os.fdopen(fd, "wb") as f:
            writer = _Writer(f)
            try:
                torch.save(dict(checkpoint), writer)
            except RuntimeError:  # torch's zip writer reports a failed write as its own error
                if writer.error is None:
                    raise
                raise writer.error from None
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:  # a full disk, a file size limit, a folder gone: the previous file is untouched
        if not isinstance(e, FileExistsError):  # (that one: the name is another's, 1 in 2^48)
            tmp.unlink(missing_ok=True)
        raise CheckpointWriteError(path, e) from e
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


class _Writer:
    """A binary file as torch.save writes to it, keeping the OSError of a failed write (torch raises its own)."""

    def __init__(self, f: Any) -> None:
        self.f, self.error = f, None

    def write(self, data: bytes) -> int:
        try:
            return self.f.write(data)
        except OSError as e:
            self.error = e
            raise

    def flush(self) -> None:
        self.f.flush()


class CheckpointWriteError(OSError):
    """A checkpoint could not be written (``save_checkpoint``): the file at ``path`` is as it was before."""

    def __init__(self, path: Path, cause: OSError) -> None:
        super().__init__(cause.errno, f"could not write {path}: {cause.strerror or cause}")
        self.path = path

    def __str__(self) -> str:
        return str(self.strerror)


def checkpoint_path(path: PathLike) -> Path:
    """``path``, or ``path/checkpoint.pt`` when it is a run dir; ValueError naming what is missing."""
    path = Path(path)
    if path.is_dir():
        if not (path / "checkpoint.pt").is_file():
            raise ValueError(f"{path} is a folder without a checkpoint.pt (is it a run dir?)")
        return path / "checkpoint.pt"
    if not path.is_file():
        raise ValueError(f"no checkpoint at {path}: no such file")
    return path


def load_checkpoint(path: PathLike, map_location: Union[str, torch.device, None] = "cpu") -> dict[str, Any]:
    """Reads a checkpoint, or a run dir's ``checkpoint.pt`` (``weights_only=True``: no code runs), and
    checks its format; ValueError for a missing file or one that is not an rlfast checkpoint."""
    path = checkpoint_path(path)
    try:
        ckpt = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # a truncated file, another pickle, not a zip: torch names each differently
        first = str(e).split(". ")[0].splitlines()[0] if str(e) else ""
        raise ValueError(f"{path} is not a readable rlfast checkpoint: truncated, corrupt or another kind of file "
                         f"({type(e).__name__}: {first})") from e  # fmt: skip
    if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT:
        raise ValueError(f"{path} is not an rlfast checkpoint of format {FORMAT}")
    verify(ckpt, path)
    return ckpt


def load_side_file(path: Path, obj: Any, global_step: int) -> Optional[Path]:
    """On --resume, loads the file saved beside ``checkpoint.pt`` (``Run.save_with_checkpoint``: a replay buffer)
    into ``obj`` when it was saved with the checkpoint resumed from (``global_step``) or after it (a process killed
    between the two writes; a note says so); a missing or older one is left with a note (``obj`` stays as it is).
    Returns its path when it loaded, else None; ValueError (one line) for a file that is unreadable or does not
    fit ``obj``."""
    name = path.name
    if not path.is_file():
        print(f"note: {path} does not exist: {name} starts empty", flush=True)
        return None
    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        verify(state, path)
    except Exception as e:  # truncated or corrupt (torch names each kind differently)
        raise ValueError(f"{path} is not readable ({type(e).__name__}: {str(e)[:120]}); move it away to resume "
                         f"without it, {name} then starts empty") from None  # fmt: skip
    saved = state.get("global_step") if isinstance(state, dict) else None
    if not isinstance(saved, int) or saved < global_step:
        print(f"note: {path} is from step {saved}, older than the checkpoint (step {global_step}): {name} "
              "starts empty", flush=True)  # fmt: skip
        return None
    if saved > global_step:  # the process ended between writing it and the checkpoint: its data are real
        print(f"note: {path} is from step {saved:,}, the checkpoint from step {global_step:,} (the run "
              f"stopped between the two writes): {name} is used as it is", flush=True)  # fmt: skip
    try:
        obj.load_state_dict(state["state"])
    except ValueError as e:
        raise ValueError(f"{path}: {e} (move the file away to resume without it)") from None
    return path


def policy_only(ckpt: Mapping[str, Any], model: str = "agent") -> dict[str, Any]:
    """``ckpt`` with what playing its policy ``model`` needs (as ``"agent"``): its weights, its normalizers, the
    trainer's args and env options. No optimizer state, other networks (a DQN's target, a population's other
    members), extra states or RNG: a file to commit or share, which ``scripts/evaluate.py`` reads and ``--resume``
    refuses (``policy_only`` is true)."""
    keep = ("format", "script", "env_id", "env_kwargs", "eval_env_kwargs", "args", "global_step", "iteration",
            "normalizers", "world_size", "best_eval")  # fmt: skip
    policy = {k: ckpt[k] for k in keep if k in ckpt}
    policy.update(models={"agent": ckpt["models"][model]}, optimizers={}, policy_only=True)
    return policy


def trainer_of(ckpt: Mapping[str, Any]) -> str:
    """The script that continues and evaluates ``ckpt`` today: the one that wrote it, but where a variant has
    since moved to its own script (``ppo_atari.py --recurrent lstm`` is now ``ppo_atari_lstm.py``)."""
    script, args = ckpt["script"], ckpt.get("args") or {}
    if script == "ppo_atari.py" and args.get("recurrent", "none") != "none":
        return "ppo_atari_lstm.py"
    return script


def restore(
    ckpt: Mapping[str, Any],
    models: Mapping[str, torch.nn.Module],
    optimizers: Optional[Mapping[str, torch.optim.Optimizer]] = None,
    normalizers: Optional[Mapping[str, Any]] = None,
    rng: bool = True,
) -> None:
    """Loads a checkpoint's states into live objects (and the global RNGs when ``rng``)."""
    for key, model in models.items():
        _unwrap(model).load_state_dict(ckpt["models"][key])
    for key, optimizer in (optimizers or {}).items():
        optimizer.load_state_dict(ckpt["optimizers"][key])
    for key, normalizer in (normalizers or {}).items():
        normalizer.load_state_dict(ckpt["normalizers"][key])
    if rng:
        set_rng_state(ckpt["rng"])


def _unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The module under a ``torch.compile`` wrapper (its state_dict keys carry no ``_orig_mod.``)."""
    return getattr(model, "_orig_mod", model)


class CheckpointSchedule:
    """Which checkpoints a trainer writes after a completed iteration (besides the final one).

    - ``checkpoint_{iteration:06d}.pt`` every ``interval`` iterations (0: none), to keep;
    - ``checkpoint.pt``, the latest state, once ``minutes`` of wall clock have passed since the
      schedule started or last asked for it (0: never during the run), so that a crash loses
      at most that much training. ``--resume`` takes either file.
    """

    def __init__(self, interval: int, minutes: float, clock: Callable[[], float] = time.monotonic) -> None:
        if interval < 0 or minutes < 0:
            raise ValueError(f"save_interval ({interval}) and save_minutes ({minutes}) must be >= 0")
        self.interval, self.seconds, self.clock = interval, 60.0 * minutes, clock
        self.last = clock()

    def due(self, iteration: int) -> list[str]:
        """File names to write now that ``iteration`` (1-based) is complete."""
        names = []
        if self.interval and iteration % self.interval == 0:
            names.append(f"checkpoint_{iteration:06d}.pt")
        now = self.clock()
        if self.seconds and now - self.last >= self.seconds:
            names.append("checkpoint.pt")
            self.last = now
        return names
