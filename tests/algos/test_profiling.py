"""SectionTimer: per-section accumulation, 'other' as the remainder, tags, summary table."""

import time
from types import SimpleNamespace

import pytest

from rlfast.algos import profiling
from rlfast.algos.profiling import SectionTimer


class FakeClock:
    """``time.perf_counter`` for the profiling module: moves only when a test says, so the arithmetic is checked
    exactly however loaded the machine is (sleeps measured under two busy pytest workers overran by 2x)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    fake = FakeClock()
    monkeypatch.setattr(profiling, "time", SimpleNamespace(perf_counter=fake))  # the module's clock only
    return fake


def test_sections_accumulate_and_other_is_the_remainder(clock):
    timer = SectionTimer(("env", "train"))
    for _ in range(2):
        timer.start_iteration()
        with timer("env"):
            clock.sleep(0.02)
        with timer("env"):
            clock.sleep(0.01)
        with timer("train"):
            clock.sleep(0.01)
        clock.sleep(0.02)  # not in a section: "other"
        perf = timer.end_iteration()
        assert set(perf) == {"perf/env", "perf/train", "perf/other"}
        assert perf["perf/env"] == pytest.approx(0.03)
        assert perf["perf/train"] == pytest.approx(0.01)
        assert perf["perf/other"] == pytest.approx(0.02)
    assert timer.iterations == 2
    assert timer.totals["env"] == pytest.approx(0.06)
    assert timer.totals["train"] == pytest.approx(0.02)


def test_each_iteration_starts_from_zero():
    timer = SectionTimer(("env",))
    timer.start_iteration()
    with timer("env"):
        time.sleep(0.02)
    timer.end_iteration()
    timer.start_iteration()
    perf = timer.end_iteration()
    assert perf["perf/env"] == 0.0


def test_exception_inside_a_section_still_counts():
    timer = SectionTimer(("env",))
    timer.start_iteration()
    with pytest.raises(ValueError), timer("env"):
        time.sleep(0.01)
        raise ValueError
    assert timer.end_iteration()["perf/env"] >= 0.01


def test_errors():
    timer = SectionTimer(("env",))
    with pytest.raises(KeyError, match="unknown section 'nope'"), timer("nope"):
        pass
    with pytest.raises(RuntimeError):
        timer.end_iteration()
    with pytest.raises(ValueError):
        SectionTimer(("env", "other"))


def test_summary_table():
    timer = SectionTimer(("env", "inference", "train"))
    timer.start_iteration()
    with timer("train"):
        time.sleep(0.01)
    timer.end_iteration()
    table = timer.summary(steps=1000)
    lines = table.splitlines()
    assert lines[0].startswith("profile over 1 iterations")
    for name in ("env", "inference", "train", "other", "total"):
        assert any(line.split()[0] == name for line in lines[3:]), name
    total = next(line for line in lines if line.startswith("total")).split()
    assert total[2] == "100.0%"
    train = next(line for line in lines if line.startswith("train")).split()
    assert float(train[-1]) > 0  # steps/s if train were the only cost


def test_nested_sections_count_for_the_inner_one_only(clock):
    timer = SectionTimer(("train", "all_reduce"))
    timer.start_iteration()
    with timer("train"):
        clock.sleep(0.03)
        with timer("all_reduce"):
            clock.sleep(0.02)
    perf = timer.end_iteration()
    assert perf["perf/train"] == pytest.approx(0.03)
    assert perf["perf/all_reduce"] == pytest.approx(0.02)
    assert perf["perf/train"] + perf["perf/all_reduce"] + perf["perf/other"] == pytest.approx(0.05)
