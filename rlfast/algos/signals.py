"""Ctrl-C and SIGTERM as KeyboardInterrupt, for the run layer's checkpoint-and-exit."""

import os
import signal
import threading
from typing import Any

DEFER_S = 0.05
"""how long a signal that came inside a lock-holding library (threading, queue, tensorboard) waits to come again"""
MAX_DEFERRALS = 40
"""after this many deferrals (2 s) the KeyboardInterrupt is raised wherever the main thread is"""
_LIBRARIES = ("/threading.py", "/queue.py")
_IMPORTS = "<frozen importlib._bootstrap"


def _in_locked_code(frame: Any) -> bool:
    """Whether the main thread is inside threading, queue or tensorboard code, where a KeyboardInterrupt can
    leave a lock held or a queue's waiter unwoken: TensorBoard's writer thread then never ends and the run's
    exit hangs on it (seen in CI: the APPO run saved its checkpoint, then waited forever in RunLog.close); or
    inside an import, which it leaves half done (torch.compile's first call imports inductor: a Ctrl-C there
    came out as a RuntimeError from a class body, "Error calling __set_name__", and a traceback)."""
    while frame is not None:
        name = frame.f_code.co_filename
        if name.endswith(_LIBRARIES) or "/tensorboard/" in name or name.startswith(_IMPORTS):
            return True
        frame = frame.f_back
    return False


def caused_by_interrupt(exc: BaseException) -> bool:
    """Whether ``exc`` is a KeyboardInterrupt or was raised while handling one, or from one: a library that turns
    the exception it caught into its own (a class body's ``__set_name__`` into RuntimeError, a compiler backend's
    failure) still ends a run the way Ctrl-C does. A context cut off with ``raise ... from None`` does not count (a
    full disk met while the interrupted run saves is its own error)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    return False


class Interrupts:
    """Between ``catch`` and ``restore``, SIGINT and SIGTERM raise KeyboardInterrupt in the main thread, also
    in a trainer started from a non-interactive shell in the background, whose SIGINT is ignored from birth
    (Python then never installs its KeyboardInterrupt handler) and which is usually stopped with SIGTERM.
    ``signum`` is the signal that came (the exit code is 128 + it). A signal that comes while the main thread is
    inside threading, queue or tensorboard code is raised a moment later, outside it (``_in_locked_code``)."""

    def __init__(self) -> None:
        self.signum = signal.SIGINT
        self._handlers: dict[int, Any] = {}  # signal -> the handler it had before catch()
        self._deferrals = 0

    def _interrupt(self, signum: int, frame: Any) -> None:
        self.signum = signum
        if _in_locked_code(frame) and self._deferrals < MAX_DEFERRALS:
            self._deferrals += 1  # not inside a lock: the signal comes again in DEFER_S
            timer = threading.Timer(DEFER_S, self._resend, (signum,))
            timer.daemon = True
            timer.start()
            return
        self._deferrals = 0
        raise KeyboardInterrupt

    def _resend(self, signum: int) -> None:
        if signum in self._handlers:  # still caught (not restored meanwhile)
            os.kill(os.getpid(), signum)

    def catch(self) -> None:
        """Installs the handlers (in the main thread only: signal.signal works there only)."""
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._handlers[signum] = signal.signal(signum, self._interrupt)

    def restore(self) -> None:
        """Puts back the handlers there were before ``catch``."""
        for signum, handler in self._handlers.items():
            signal.signal(signum, handler)
        self._handlers.clear()
