"""rlfast/algos/signals.py: SIGINT/SIGTERM become KeyboardInterrupt in the main thread, but not inside threading,
queue or tensorboard code (a lock left held there hung a run's exit) nor inside an import: there it comes a moment
later. An exception a library raised from a KeyboardInterrupt still counts as one (caused_by_interrupt)."""

import os
import queue
import signal
import sys
import threading
import time

import pytest

from rlfast.algos.signals import Interrupts, caused_by_interrupt


def test_a_signal_inside_queue_code_is_raised_just_after_it():
    interrupts = Interrupts()
    interrupts.catch()
    try:
        threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGTERM)).start()
        with pytest.raises(queue.Empty):  # the signal came inside Queue.get: not raised there
            queue.Queue().get(timeout=0.5)
        start = time.monotonic()
        with pytest.raises(KeyboardInterrupt):  # but just after it
            time.sleep(2.0)
        assert time.monotonic() - start < 0.5 and interrupts.signum == signal.SIGTERM
    finally:
        interrupts.restore()


def test_a_signal_elsewhere_is_raised_at_once_and_restore_puts_the_handlers_back():
    before = signal.getsignal(signal.SIGTERM)
    interrupts = Interrupts()
    interrupts.catch()
    try:
        threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGINT)).start()
        start = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            time.sleep(2.0)
        assert time.monotonic() - start < 0.5 and interrupts.signum == signal.SIGINT
    finally:
        interrupts.restore()
    assert signal.getsignal(signal.SIGTERM) == before


def test_a_signal_inside_an_import_is_raised_just_after_it(tmp_path, monkeypatch):
    # torch.compile's first call imports inductor: a KeyboardInterrupt inside that import came out as a RuntimeError
    # ("Error calling __set_name__") and a traceback, the module left half built.
    (tmp_path / "slow_import_mod.py").write_text("import time\ntime.sleep(0.4)\nDONE = True\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    interrupts = Interrupts()
    interrupts.catch()
    try:
        threading.Timer(0.1, os.kill, (os.getpid(), signal.SIGINT)).start()
        import slow_import_mod  # noqa: F401  (the signal comes during its sleep: not raised there)

        assert slow_import_mod.DONE
        start = time.monotonic()
        with pytest.raises(KeyboardInterrupt):  # but just after it
            time.sleep(2.0)
        assert time.monotonic() - start < 0.5
    finally:
        interrupts.restore()
        sys.modules.pop("slow_import_mod", None)


def _raise(exc: BaseException, cause: BaseException = None, during: BaseException = None, hide: bool = False):
    try:
        if during is not None:
            try:
                raise during
            except BaseException:
                if hide:
                    raise exc from None
                raise exc
        raise exc from cause
    except BaseException as e:
        return e


def test_caused_by_interrupt_follows_the_causes_a_library_may_wrap_it_in():
    assert caused_by_interrupt(KeyboardInterrupt())
    assert caused_by_interrupt(_raise(RuntimeError("Error calling __set_name__"), cause=KeyboardInterrupt()))
    assert caused_by_interrupt(_raise(ValueError("in a handler"), during=KeyboardInterrupt()))
    deep = _raise(RuntimeError("outer"), cause=_raise(TypeError("inner"), cause=KeyboardInterrupt()))
    assert caused_by_interrupt(deep)
    assert not caused_by_interrupt(RuntimeError("boom"))
    assert not caused_by_interrupt(_raise(RuntimeError("boom"), cause=ValueError("other")))
    # raise ... from None: an error of its own (a full disk met while the interrupted run saves)
    assert not caused_by_interrupt(_raise(SystemExit("disk full"), during=KeyboardInterrupt(), hide=True))
