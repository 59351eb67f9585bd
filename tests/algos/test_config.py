"""parse_args: dataclass defaults <- base (a checkpoint's args) <- --config TOML <- command line."""

from dataclasses import dataclass
from typing import ClassVar, Optional

import pytest

from rlfast.algos.config import parse_args, split_config_flag


@dataclass
class Args:
    num_envs: int = 4
    """envs"""
    learning_rate: float = 2.5e-4
    """lr"""
    anneal_lr: bool = True
    """anneal"""
    target_kl: Optional[float] = None
    """kl"""
    config: Optional[str] = None
    """preset"""


@dataclass
class Renamed:
    RENAMED: ClassVar[dict] = {"rollout": "trajectory_length"}
    trajectory_length: int = 32
    """T"""


def test_a_renamed_fields_old_name_works_in_every_layer(tmp_path):
    """Presets, checkpoints' args and command lines written before a rename keep their meaning."""
    assert parse_args(Renamed, [], base={"rollout": 8}).trajectory_length == 8  # an old checkpoint
    assert parse_args(Renamed, ["--config", write(tmp_path, "rollout = 16\n")]).trajectory_length == 16
    assert parse_args(Renamed, ["--rollout", "4"]).trajectory_length == 4
    assert parse_args(Renamed, ["--rollout=5"]).trajectory_length == 5
    assert parse_args(Renamed, ["--trajectory-length", "6"], base={"rollout": 8}).trajectory_length == 6


@dataclass
class Added:
    ADDED: ClassVar[dict] = {"auto_speed": False}
    auto_speed: bool = True
    """new default"""
    seed: int = 1
    """seed"""


def test_a_checkpoint_older_than_a_field_resumes_with_the_value_its_run_had():
    assert parse_args(Added, []).auto_speed is True  # a new run: the new default
    assert parse_args(Added, [], base={"seed": 3}) == Added(auto_speed=False, seed=3)  # written before the field
    assert parse_args(Added, [], base={"seed": 3, "auto_speed": True}).auto_speed is True  # written after it
    assert parse_args(Added, ["--auto-speed"], base={"seed": 3}).auto_speed is True  # the command line wins


def write(tmp_path, text):
    path = tmp_path / "preset.toml"
    path.write_text(text)
    return str(path)


def test_defaults_without_config():
    assert parse_args(Args, []) == Args()


def test_toml_sets_defaults_and_command_line_wins(tmp_path):
    path = write(tmp_path, "num_envs = 16\nlearning-rate = 1e-3\nanneal_lr = false\ntarget_kl = 0.02\n")
    args = parse_args(Args, ["--config", path])
    assert args == Args(num_envs=16, learning_rate=1e-3, anneal_lr=False, target_kl=0.02, config=path)
    args = parse_args(Args, [f"--config={path}", "--num-envs", "2", "--anneal-lr"])
    assert args.num_envs == 2 and args.anneal_lr and args.learning_rate == 1e-3
    args = parse_args(Args, ["--num-envs", "3", "--config", path])  # order does not matter: the flag wins
    assert args.num_envs == 3


def test_base_layer_sits_under_the_toml(tmp_path):
    path = write(tmp_path, "num_envs = 16\n")
    base = {"num_envs": 8, "learning_rate": 0.1, "not_a_field": 1}
    assert parse_args(Args, [], base=base) == Args(num_envs=8, learning_rate=0.1)
    args = parse_args(Args, ["--config", path], base=base)
    assert args.num_envs == 16 and args.learning_rate == 0.1


def test_unknown_key_and_missing_file_are_errors(tmp_path):
    path = write(tmp_path, "num_envz = 16\n")
    with pytest.raises(SystemExit, match="unknown keys num_envz"):
        parse_args(Args, ["--config", path])
    with pytest.raises(SystemExit, match="not found"):
        parse_args(Args, ["--config", str(tmp_path / "nope.toml")])
    with pytest.raises(SystemExit, match="needs a path"):
        split_config_flag(["--config"])


def test_wrong_type_in_toml_is_an_error(tmp_path):
    with pytest.raises(SystemExit, match="num_envs = 'many' is not an int"):
        parse_args(Args, ["--config", write(tmp_path, 'num_envs = "many"\n')])
    with pytest.raises(SystemExit, match="anneal_lr = 1 is not a bool"):
        parse_args(Args, ["--config", write(tmp_path, "anneal_lr = 1\n")])
    args = parse_args(Args, ["--config", write(tmp_path, "learning_rate = 1\ntarget_kl = 0\n")])
    assert args.learning_rate == 1.0 and isinstance(args.target_kl, float)


def test_resume_checks_the_checkpoints_flags_and_env(tmp_path, capsys):
    """A saved flag of the wrong type, a saved env_id that contradicts the checkpoint, --env-id of another task: one
    line naming the file; a flag the trainer no longer has: a note, and the run goes on without it."""
    import torch

    from rlfast.algos.config import parse_or_resume

    @dataclass
    class Resumable(Args):
        env_id: str = "CartPole-v1"
        """task"""
        resume: Optional[str] = None
        """checkpoint"""

    def saved(**args) -> str:
        path = tmp_path / "ckpt.pt"
        torch.save({"format": 1, "script": "x.py", "env_id": "CartPole-v1", "args": {"env_id": "CartPole-v1", **args}},
                   path)  # fmt: skip
        return str(path)

    with pytest.raises(SystemExit, match=r"checkpoint .*ckpt.pt: num_envs = 'many' is not an int"):
        parse_or_resume(Resumable, "x.py", ["--resume", saved(num_envs="many")])
    with pytest.raises(SystemExit, match="was trained on CartPole-v1 but its flags say env_id = 'Acrobot-v1'"):
        parse_or_resume(Resumable, "x.py", ["--resume", saved(env_id="Acrobot-v1")])
    with pytest.raises(SystemExit, match="was trained on CartPole-v1; its networks do not go on with --env-id Acro"):
        parse_or_resume(Resumable, "x.py", ["--resume", saved(), "--env-id", "Acrobot-v1"])
    args, _ = parse_or_resume(Resumable, "x.py", ["--resume", saved(num_envs=3, gone_flag=1)])
    assert args.num_envs == 3 and "sets gone_flag, which this trainer no longer has: ignored" in capsys.readouterr().err


def test_env_kwargs_items_parse_to_typed_options():
    from rlfast.algos.runargs import parse_env_kwargs

    assert parse_env_kwargs(["a=False", "b = 3", "c=0.1", "d=1e-3", "e=walker.xml", "f=TRUE"]) == {
        "a": False, "b": 3, "c": 0.1, "d": 1e-3, "e": "walker.xml", "f": True}  # fmt: skip
    assert parse_env_kwargs([]) == {}
    for bad, message in (("a", "is not name=value"), ("=1", "is not name=value"), ("a=", "is not name=value"),
                         ("2a=1", "is not name=value")):  # fmt: skip
        with pytest.raises(ValueError, match=message):
            parse_env_kwargs([bad])
    with pytest.raises(ValueError, match="a is given twice"):
        parse_env_kwargs(["a=1", "a=2"])


def test_a_toml_array_of_strings_fills_a_tuple_field_without_a_warning(tmp_path, recwarn):
    @dataclass
    class WithItems:
        items: tuple[str, ...] = ()

    args = parse_args(WithItems, ["--config", write(tmp_path, 'items = ["a=1", "b=false"]\n')])
    assert args.items == ("a=1", "b=false") and not [w for w in recwarn if "tuple" in str(w.message)]
    assert parse_args(WithItems, ["--config", write(tmp_path, 'items = ["a=1"]\n'), "--items", "c=2"]).items == ("c=2",)
    with pytest.raises(SystemExit, match=r"items = \[1\] is not a list of strings"):
        parse_args(WithItems, ["--config", write(tmp_path, "items = [1]\n")])


def test_turning_off_what_auto_speed_turns_on_is_refused_unless_auto_speed_is_off(tmp_path):
    from rlfast.algos.runargs import CNNArgs

    assert parse_args(CNNArgs, []).auto_speed  # the default: --no-bf16 alone would change nothing
    with pytest.raises(SystemExit, match=r"^error: --no-bf16 does nothing while --auto-speed .* --no-auto-speed"):
        parse_args(CNNArgs, ["--no-bf16"])
    with pytest.raises(SystemExit, match=r"^error: --no-channels-last, --no-flush-denormals do nothing"):
        parse_args(CNNArgs, ["--no-flush-denormals", "--no-channels-last"])
    preset = tmp_path / "p.toml"
    preset.write_text("bf16 = false\n")
    with pytest.raises(SystemExit, match=r"^error: --no-bf16 does nothing"):
        parse_args(CNNArgs, ["--config", str(preset)])
    args = parse_args(CNNArgs, ["--no-auto-speed", "--no-bf16", "--channels-last"])
    assert (args.auto_speed, args.bf16, args.channels_last) == (False, False, True)
    assert parse_args(CNNArgs, ["--bf16"]).bf16  # turning one on is no conflict
