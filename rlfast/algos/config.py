"""Command lines over presets: ``--config preset.toml`` supplies defaults, flags override them.

    args = parse_args(Args)                      # sys.argv[1:]
    args = parse_args(Args, base=ckpt["args"])   # a checkpoint's args as the first layer

Layers, later wins: the dataclass defaults, ``base``, the TOML file, the command line. TOML
keys are ``Args`` field names (``num_envs`` or ``num-envs``); unknown keys are an error
naming them. The preset's path is recorded in the ``config`` field when ``Args`` has one. A field's
old name (``Args.RENAMED``, rlfast/algos/flags.py) still works in every layer: as a flag, a TOML key
and in the args of a checkpoint written before the rename; a field a checkpoint predates takes the value
``Args.ADDED`` names for it.
"""

import dataclasses
import sys
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence, TypeVar, Union, get_args, get_origin, get_type_hints

import tyro

from rlfast.algos.checkpoint import checkpoint_path, load_checkpoint
from rlfast.algos.distributed import World

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

T = TypeVar("T")


def split_config_flag(argv: Sequence[str]) -> tuple[Optional[str], list[str]]:
    """Removes ``--config PATH`` / ``--config=PATH`` from ``argv``: ``(path or None, rest)``."""
    path, rest, i = None, [], 0
    argv = list(argv)
    while i < len(argv):
        arg = argv[i]
        if arg == "--config":
            if i + 1 >= len(argv):
                raise SystemExit("error: --config needs a path to a .toml file")
            path, i = argv[i + 1], i + 2
            continue
        if arg.startswith("--config="):
            path = arg.split("=", 1)[1]
        else:
            rest.append(arg)
        i += 1
    return path, rest


def new_names(cls: type, values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` with the old field names of ``cls.RENAMED`` replaced by the new ones."""
    renamed = getattr(cls, "RENAMED", {})
    return {renamed.get(key, key): value for key, value in values.items()}


def new_flags(cls: type, argv: Sequence[str]) -> list[str]:
    """``argv`` with ``--old-name`` (and ``--old-name=v``) of ``cls.RENAMED`` written as ``--new-name``."""
    flags = {}
    for old, new in getattr(cls, "RENAMED", {}).items():
        flags[f"--{old}"] = flags[f"--{old.replace('_', '-')}"] = f"--{new.replace('_', '-')}"
    out = []
    for arg in argv:
        name, eq, value = arg.partition("=")
        out.append(flags[name] + eq + value if name in flags else arg)
    return out


def load_toml(cls: type, path: str) -> dict[str, Any]:
    """A preset's values keyed by field name; SystemExit naming the file for unknown keys."""
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise SystemExit(f"error: config file {path} not found") from None
    except tomllib.TOMLDecodeError as e:
        raise SystemExit(f"error: config file {path}: {e}") from None
    names = {f.name for f in dataclasses.fields(cls)}
    values = new_names(cls, {key.replace("-", "_"): value for key, value in data.items()})
    unknown = sorted(set(values) - names)
    if unknown:
        raise SystemExit(f"error: config file {path}: unknown keys {', '.join(unknown)} (not fields of {cls.__name__})")
    hints = get_type_hints(cls)
    for key, value in values.items():
        values[key] = _check_type(path, key, value, hints[key])
    return values


def _check_type(path: str, key: str, value: Any, annotation: Any) -> Any:
    """``value`` if it fits a scalar field type (ints widen to float); SystemExit otherwise."""
    if get_origin(annotation) is Union:  # Optional[X]: TOML has no null, so the value must be an X
        options = [a for a in get_args(annotation) if a is not type(None)]
        annotation = options[0] if len(options) == 1 else annotation
    if annotation is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if annotation in (int, float, bool, str) and (type(value) is not annotation):
        raise SystemExit(f"error: config file {path}: {key} = {value!r} is not a {annotation.__name__}")
    return value


def parse_args(cls: type[T], argv: Optional[Sequence[str]] = None, base: Optional[Mapping[str, Any]] = None) -> T:
    """Builds ``cls`` from defaults <- ``base`` <- ``--config`` TOML <- command line (``argv``)."""
    path, rest = split_config_flag(sys.argv[1:] if argv is None else argv)
    names = {f.name for f in dataclasses.fields(cls)}
    values = {k: v for k, v in new_names(cls, base or {}).items() if k in names}
    if base is not None:  # a checkpoint written before a field was added: the value its run had
        values = {**{k: v for k, v in getattr(cls, "ADDED", {}).items() if k in names}, **values}
    if path is not None:
        values.update(load_toml(cls, path))
        if "config" in names:
            values["config"] = str(Path(path))
    return tyro.cli(cls, default=cls(**values), args=new_flags(cls, rest))


def parse_or_resume(cls: type[T], script: str, argv: Optional[Sequence[str]] = None) -> tuple[T, Optional[dict]]:
    """A trainer's command line: ``(args, None)``, or with ``--resume CKPT`` ``(args, checkpoint)``
    where the checkpoint's args are the ``base`` layer (flags and ``--config`` still override).

    ``cls`` must have a ``resume`` field; a ``local_num_envs`` sets ``num_envs`` (``with_local_num_envs``).
    ``--resume`` takes a checkpoint or a run dir (its
    ``checkpoint.pt``; ``args.resume`` becomes that file); a missing file, one that is not a
    checkpoint and one written by another script end the process with one line.
    """
    args = parse_args(cls, argv)
    if getattr(args, "resume", None) is None:
        return with_local_num_envs(args), None
    try:
        path = checkpoint_path(args.resume)
        ckpt = load_checkpoint(path)
    except ValueError as e:
        raise SystemExit(f"error: --resume: {e}") from None
    if ckpt["script"] != script:
        raise SystemExit(f"error: --resume: {path} was written by {ckpt['script']}, not {script}")
    args = parse_args(cls, argv, base=ckpt["args"])
    args.resume = str(path)
    return with_local_num_envs(args), ckpt


def with_local_num_envs(args: T) -> T:
    """``args`` with ``num_envs`` = world size x ``local_num_envs`` when that is given (Cleanba's envs per
    rank; the world is torchrun's, one process without it)."""
    local = getattr(args, "local_num_envs", None)
    if local is not None and local >= 1:
        try:
            args.num_envs = local * World.from_env().world_size
        except ValueError as e:
            raise SystemExit(f"error: {e}") from None
    return args
