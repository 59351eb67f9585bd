"""Every flag a trainer accepts does something in it: each field of a trainer's ``Args`` (what its ``--help``
lists) is read as ``args.<field>`` (or ``self.<field>`` in its Args classes) in the script or in the modules
that take its Args: the run layer (run.py, runargs.py, config.py, distributed.py) and the modules that define
its Args' base classes."""

import dataclasses
import inspect
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TRAINERS = ["ppo.py", "ppo_atari.py", "ppo_atari_lstm.py", "ppo_continuous.py", "appo.py", "dqn.py", "dqn_atari.py"]
RUN_LAYER = ["run.py", "runargs.py", "config.py", "distributed.py"]


def readers(module, args_type) -> str:
    """The source of the script and of the modules that read its Args: the run layer, those of ``rlfast.algos``
    the script imports, and those defining its Args' base classes."""
    script = Path(module.__file__).read_text()
    names = set(RUN_LAYER) | {f"{m}.py" for m in re.findall(r"^from rlfast\.algos\.(\w+) import", script, re.M)}
    texts = [script] + [(ROOT / "rlfast" / "algos" / name).read_text() for name in sorted(names)]
    for base in args_type.__mro__[1:-1]:  # not object
        source = inspect.getsourcefile(base)
        if source and "rlfast" in source:
            texts.append(Path(source).read_text())
    return "\n".join(texts)


@pytest.mark.parametrize("script", TRAINERS)
def test_every_flag_of_a_trainer_is_read(load_script, script):
    module = load_script(script)
    text = readers(module, module.Args)
    # args.name; or by name where the run layer reads a field only some Args have (getattr(args, "name", ...),
    # values["name"], "name" in names: --config's path, recorded in the field).
    read = r"(?<![\w.])(?:args|self|self\.args|run\.args)\.{0}\b|[\"']{0}[\"'](?:\]|,|\)| in )"
    unread = [f.name for f in dataclasses.fields(module.Args) if not re.search(read.format(f.name), text)]
    assert not unread, f"{script} accepts flags it never reads: {unread}"


@pytest.mark.parametrize("script", TRAINERS)
def test_help_lists_the_args_fields(trainer_help, script):
    """The --help the test above stands for: each field is a flag there (tyro writes --field-name)."""
    out = trainer_help(script)
    assert "--total-timesteps" in out and "--seed" in out
    cnn = "--channels-last" in out
    cnn_trainers = ("ppo_atari.py", "ppo_atari_lstm.py", "dqn_atari.py", "appo.py")
    assert cnn == (script in cnn_trainers), "the CNN speed flags only where a CNN is"
