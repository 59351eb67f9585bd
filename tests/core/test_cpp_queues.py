"""Builds tests/cpp/test_queues.cc (the action queue, state buffer queue and semaphore under
stress, with exact invariants) and runs it plain and under ThreadSanitizer."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "tests" / "cpp" / "test_queues.cc"
CXX = shutil.which("g++") or shutil.which("c++")


def build(tmp_path: Path, name: str, flags: list[str]) -> Path:
    exe = tmp_path / name
    cmd = [CXX, "-std=c++17", "-pthread", f"-I{ROOT}", *flags, str(SOURCE), "-o", str(exe)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return exe


def tsan_links(tmp_path: Path) -> bool:
    probe = tmp_path / "probe.cc"
    probe.write_text("int main() { return 0; }\n")
    proc = subprocess.run([CXX, "-fsanitize=thread", str(probe), "-o", str(tmp_path / "probe")],
                          capture_output=True, timeout=120)  # fmt: skip
    return proc.returncode == 0


@pytest.mark.skipif(CXX is None, reason="no C++ compiler (g++ / c++) on PATH")
@pytest.mark.parametrize("mode", ["plain", "tsan"])
def test_queues(tmp_path, mode):
    if mode == "tsan" and not tsan_links(tmp_path):
        pytest.skip(f"{CXX} cannot link -fsanitize=thread programs here")
    flags = ["-O2"] if mode == "plain" else ["-fsanitize=thread", "-O1", "-g"]
    exe = build(tmp_path, f"test_queues_{mode}", flags)
    env = dict(os.environ, TSAN_OPTIONS="halt_on_error=1 exitcode=66")
    proc = subprocess.run([str(exe)], capture_output=True, text=True, timeout=240, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "WARNING: ThreadSanitizer" not in proc.stderr, proc.stderr
    assert proc.stdout.count("ok ") == 6, proc.stdout
