"""The Atari trainers' CPU speed options as benchmark contender suffixes, shared by bench_ppo.py,
bench_dqn.py and bench_appo.py: ``rlfast+cl+compile`` is the ``rlfast`` contender run with
``--no-auto-speed --channels-last --compile``, so each option (and each combination) gets its own row beside
the reference in one run. A contender runs with the options it names and no others: ``rlfast`` alone is float32
NCHW eager (CleanRL's numerics), ``rlfast+auto`` what the trainers' defaults pick on this machine
(``--auto-speed``)."""

OPTIONS = {"cl": "--channels-last", "compile": "--compile", "bf16": "--bf16", "ftz": "--flush-denormals",
           "auto": "--auto-speed"}
"""suffix -> the trainer flag it adds (see RunArgs in rlfast/algos/runargs.py)"""


def split(name: str) -> tuple[str, list[str]]:
    """``"rlfast+cl+compile"`` -> ``("rlfast", ["--no-auto-speed", "--channels-last", "--compile"])``; KeyError for
    an unknown suffix. Without ``+auto`` the flags start with ``--no-auto-speed``: only the options named."""
    base, *options = name.split("+")
    flags = [OPTIONS[o] for o in options]
    return base, flags if OPTIONS["auto"] in flags else ["--no-auto-speed", *flags]


def unknown(names: tuple[str, ...], plain: tuple[str, ...], tunable: tuple[str, ...]) -> list[str]:
    """The contender names that are neither one of ``plain`` nor one of ``tunable`` with known ``+option``s."""
    bad = []
    for name in names:
        base, *options = name.split("+")
        ok = base in plain and not options or base in tunable and all(o in OPTIONS for o in options)
        bad += [] if ok else [name]
    return bad


def help_text(plain: tuple[str, ...], tunable: tuple[str, ...]) -> str:
    """The error line's list of choices."""
    return (f"choose from {list(plain)}; {', '.join(tunable)} also with +option suffixes from {list(OPTIONS)} "
            f"(e.g. {tunable[0]}+cl+compile)")  # fmt: skip


def check(names: tuple[str, ...], plain: tuple[str, ...], tunable: tuple[str, ...]) -> None:
    """Ends a benchmark with one ``error: ...`` line when ``names`` holds a contender it does not know."""
    bad = unknown(names, plain, tunable)
    if bad:
        raise SystemExit(f"error: unknown contender(s) {bad}; {help_text(plain, tunable)}")
