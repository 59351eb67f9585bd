"""benchmarks/speed_options.py: contender suffixes -> trainer flags, as the three Atari benchmarks use them."""

import pytest


def test_split_and_unknown(load_bench):
    so = load_bench("speed_options.py")
    assert so.split("rlfast") == ("rlfast", ["--no-auto-speed"])  # float32 NCHW eager: only the options named
    assert so.split("rlfast-lstm+cl+compile") == ("rlfast-lstm", ["--no-auto-speed", "--channels-last",
                                                                  "--compile"])  # fmt: skip
    assert so.split("rlfast+auto") == ("rlfast", ["--auto-speed"])  # the trainers' defaults
    with pytest.raises(KeyError):
        so.split("rlfast+turbo")
    plain, tunable = ("rlfast", "cleanrl"), ("rlfast",)
    assert so.unknown(("rlfast", "rlfast+bf16", "cleanrl"), plain, tunable) == []
    assert so.unknown(("cleanrl+cl", "rlfast+turbo", "sb3", "rlfast+"), plain, tunable) == [
        "cleanrl+cl", "rlfast+turbo", "sb3", "rlfast+"]  # fmt: skip
    assert "rlfast+cl+compile" in so.help_text(plain, tunable)


def test_every_option_is_a_flag_of_the_atari_trainers(load_bench, load_script):
    so = load_bench("speed_options.py")
    for script in ("ppo_atari.py", "ppo_atari_lstm.py", "dqn_atari.py", "appo.py"):
        fields = load_script(script).Args.__dataclass_fields__
        for flag in so.OPTIONS.values():
            assert flag[2:].replace("-", "_") in fields, (script, flag)


def test_benchmarks_pass_the_flags_on(load_bench, tmp_path):
    bench_dqn = load_bench("bench_dqn.py")
    cmd = bench_dqn.contender_command("rlfast+cl+bf16", bench_dqn.Args(), "4x32", tmp_path)
    assert "dqn_atari.py" in cmd[1] and cmd[-2:] == ["--channels-last", "--bf16"]
    assert "--channels-last" not in bench_dqn.contender_command("rlfast", bench_dqn.Args(), "4x32", tmp_path)
    with pytest.raises(SystemExit, match=r"unknown contender\(s\) \['cleanrl\+cl'\]"):
        bench_dqn.main(bench_dqn.Args(contenders=("cleanrl+cl",)))
    bench_appo = load_bench("bench_appo.py")
    with pytest.raises(SystemExit, match=r"unknown contender\(s\) \['env-only\+cl'\]"):
        bench_appo.main(bench_appo.Args(contenders=("appo+cl", "sampler-only+cl", "env-only+cl")))
