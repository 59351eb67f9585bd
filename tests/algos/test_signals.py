"""rlfast/algos/signals.py: SIGINT/SIGTERM become KeyboardInterrupt in the main thread, but not inside threading,
queue or tensorboard code (a lock left held there hung a run's exit): there it comes a moment later."""

import os
import queue
import signal
import threading
import time

import pytest

from rlfast.algos.signals import Interrupts


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
