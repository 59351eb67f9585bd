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

from rlfast.algos.checkpoint import checkpoint_path, load_checkpoint, trainer_of
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


def _check_type(path: str, key: str, value: Any, annotation: Any, what: str = "config file") -> Any:
    """``value`` if it fits a scalar field type (ints widen to float); SystemExit naming ``what`` and ``path``
    otherwise. TOML has no null; a checkpoint's None fits an Optional field."""
    if get_origin(annotation) is Union:  # Optional[X]
        if value is None and type(None) in get_args(annotation):
            return value
        options = [a for a in get_args(annotation) if a is not type(None)]
        annotation = options[0] if len(options) == 1 else annotation
    if annotation is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if get_origin(annotation) is tuple and isinstance(value, list):  # a TOML array (or a checkpoint's list)
        if get_args(annotation) == (str, ...) and not all(isinstance(v, str) for v in value):
            raise SystemExit(f"error: {what} {path}: {key} = {value!r} is not a list of strings")
        return tuple(value)
    if annotation in (int, float, bool, str) and (type(value) is not annotation):
        raise SystemExit(f"error: {what} {path}: {key} = {value!r} is not {_article(annotation.__name__)}")
    return value


def parse_args(cls: type[T], argv: Optional[Sequence[str]] = None, base: Optional[Mapping[str, Any]] = None) -> T:
    """Builds ``cls`` from defaults <- ``base`` <- ``--config`` TOML <- command line (``argv``)."""
    path, rest = split_config_flag(sys.argv[1:] if argv is None else argv)
    names = {f.name for f in dataclasses.fields(cls)}
    values = {k: v for k, v in new_names(cls, base or {}).items() if k in names}
    if base is not None:  # a checkpoint written before a field was added: the value its run had
        values = {**{k: v for k, v in getattr(cls, "ADDED", {}).items() if k in names}, **values}
    preset: dict[str, Any] = {}
    if path is not None:
        preset = load_toml(cls, path)
        values.update(preset)
        if "config" in names:
            values["config"] = str(Path(path))
    flags = new_flags(cls, rest)
    args = tyro.cli(cls, default=cls(**values), args=flags)
    check_auto_off(cls, args, preset, flags)
    return args


def check_auto_off(cls: type, args: Any, preset: Mapping[str, Any], argv: Sequence[str]) -> None:
    """SystemExit when a flag that ``--auto-speed`` turns on (``cls.AUTO_SPEED``) is turned off (``--no-bf16``, or
    ``bf16 = false`` in the preset) while ``--auto-speed`` is on: on a CPU it would turn the flag back on in
    silence (the flags' defaults are off, so the ``--no-`` form never changes anything by itself)."""
    off = [name for name in getattr(cls, "AUTO_SPEED", ())
           if f"--no-{name.replace('_', '-')}" in argv or preset.get(name) is False]  # fmt: skip
    if off and getattr(args, "auto_speed", False):
        flags = ", ".join(f"--no-{name.replace('_', '-')}" for name in off)
        does, it = ("does", "it") if len(off) == 1 else ("do", "them")
        raise SystemExit(f"error: {flags} {does} nothing while --auto-speed (on by default) turns {it} on on a "
                         f"CPU: add --no-auto-speed, then the speed options you want (--channels-last, "
                         f"--flush-denormals, --bf16)")  # fmt: skip


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
    if ckpt.get("policy_only"):
        raise SystemExit(f"error: --resume: {path} holds a policy only (evaluate.py --save-policy: no optimizer "
                         "state): resume from its run's checkpoint.pt")  # fmt: skip
    if (goes_on := trainer_of(ckpt)) != script:
        moved = "" if goes_on == ckpt["script"] else f" (that run now goes on in {goes_on})"
        raise SystemExit(f"error: --resume: {path} was written by {ckpt['script']}{moved}, not {script}")
    saved = checkpoint_args(cls, path, ckpt)
    args = parse_args(cls, argv, base=saved)
    if getattr(args, "env_id", ckpt["env_id"]) != ckpt["env_id"]:
        raise SystemExit(f"error: --resume: {path} was trained on {ckpt['env_id']}; its networks do not go on with "
                         f"--env-id {args.env_id} (start a new run instead)")  # fmt: skip
    args.resume = str(path)
    return with_local_num_envs(args), ckpt


def checkpoint_args(cls: type, path: Path, ckpt: Mapping[str, Any]) -> dict[str, Any]:
    """A checkpoint's ``args`` as ``parse_args``' base: a value of the wrong type ends the process with one line
    naming the file and the flag; a flag ``cls`` no longer has is dropped with a note."""
    args = ckpt.get("args")
    if not isinstance(args, Mapping) or not all(isinstance(k, str) for k in args):
        raise SystemExit(f"error: --resume: {path} holds no flags (its 'args' is {type(args).__name__})")
    values = new_names(cls, args)
    names = {f.name for f in dataclasses.fields(cls)}
    dropped = sorted(set(values) - names)
    if dropped:
        print(f"note: --resume: {path} sets {', '.join(dropped)}, which this trainer no longer has: ignored",
              file=sys.stderr, flush=True)  # fmt: skip
    hints = get_type_hints(cls)
    kept = {k: v for k, v in values.items() if k in names}
    for key, value in kept.items():
        kept[key] = _check_type(str(path), key, value, hints[key], what="--resume: checkpoint")
    if ckpt.get("env_id") != kept.get("env_id", ckpt.get("env_id")):
        raise SystemExit(f"error: --resume: {path} was trained on {ckpt.get('env_id')} but its flags say env_id = "
                         f"{kept['env_id']!r}: the file was altered")  # fmt: skip
    return kept


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


def _article(name: str) -> str:
    """'an int', 'a float'."""
    return f"{'an' if name[0] in 'aeiou' else 'a'} {name}"
