"""The docs site's flags tables (generated at build time by ``build_tools/docs_site/hooks.py`` from each trainer's
``Args``) list exactly the flags that the trainer's ``--help`` lists, and every trainer page shows them."""

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TRAINERS = ["ppo.py", "ppo_atari.py", "ppo_atari_lstm.py", "ppo_continuous.py", "appo.py", "dqn.py", "dqn_atari.py"]


@pytest.fixture(scope="module")
def hooks():
    spec = importlib.util.spec_from_file_location("docs_site_hooks", ROOT / "build_tools" / "docs_site" / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def help_entries(out: str) -> dict[str, str]:
    """``--help``'s entries (its text ``out``): each option name (at the start of an entry, not one named in a help
    text) -> the entry's text, its wrapped lines joined."""
    entries, names = {}, None
    for line in out.splitlines():
        if m := re.match(r"^│ (--[\w-]+(?:, --[\w-]+)*)", line):
            names = m.group(1).split(", ")
            entries.update({name: "" for name in names})
        if names and line.startswith("│"):
            for name in names:
                entries[name] += " " + line.strip("│ ")
    entries.pop("--help", None)
    return entries


@pytest.mark.parametrize("script", TRAINERS)
def test_the_generated_table_lists_the_flags_of_help(hooks, trainer_help, script):
    table = hooks.flags_table(script)
    documented = set()
    for flag, kind in re.findall(r"^\| `(--[\w-]+)` \| ((?:[^|\\]|\\.)+) \|", table, re.MULTILINE):
        documented |= {flag, "--no-" + flag[2:]} if kind.strip() == "bool" else {flag}
    entries = help_entries(trainer_help(script))
    assert len(entries) > 25, entries  # the parse found the options, not a few words of a help text
    assert documented == set(entries), (sorted(documented - set(entries)), sorted(set(entries) - documented))
    for flag, _, default, _ in hooks.flag_rows(script):  # each row's default is the one --help shows
        shown = re.search(r"\(default: (.*?)\)\s*$", " ".join(entries[flag].split()))
        assert shown and shown.group(1) == default.strip("'"), (flag, default, entries[flag])


@pytest.mark.parametrize("script", TRAINERS)
def test_each_trainer_page_shows_its_generated_flags(script):
    page = (ROOT / "docs" / "trainers" / script.replace(".py", ".md")).read_text()
    assert f"<!-- flags: {script} -->" in page
    assert "| `--" not in page, "a flags table written by hand: use the marker, the build generates it"


def test_the_marker_becomes_the_tables(hooks):
    out = hooks.on_page_markdown("intro\n<!-- flags: dqn.py -->\nafter", None, None, None)
    assert "<!-- flags" not in out and out.startswith("intro\n") and out.endswith("\nafter")
    assert "| `--buffer-size` | int | `10000` |" in out and "| `--seed` | int | `1` |" in out
