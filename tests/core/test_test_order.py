"""tests/conftest.py's SLOWEST_FILES: each still exists, and they are what a collection runs first."""

import subprocess
import sys

from conftest import ROOT, SLOWEST_FILES


def test_each_slowest_file_exists():
    missing = [name for name in SLOWEST_FILES if not (ROOT / name).is_file()]
    assert not missing, f"SLOWEST_FILES names files that are gone: {missing}"


def test_a_collection_starts_with_them_in_their_order():
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                          "tests/core/test_input_rules.py", SLOWEST_FILES[1], SLOWEST_FILES[0]], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert out.returncode == 0, out.stdout + out.stderr
    files = [line.split("::")[0] for line in out.stdout.splitlines() if "::" in line]
    order = list(dict.fromkeys(files))
    assert order == [SLOWEST_FILES[0], SLOWEST_FILES[1], "tests/core/test_input_rules.py"], order
