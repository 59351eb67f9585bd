"""Ctrl-C and SIGTERM as KeyboardInterrupt, for the run layer's checkpoint-and-exit."""

import signal
import threading
from typing import Any


class Interrupts:
    """Between ``catch`` and ``restore``, SIGINT and SIGTERM raise KeyboardInterrupt in the main thread, also
    in a trainer started from a non-interactive shell in the background, whose SIGINT is ignored from birth
    (Python then never installs its KeyboardInterrupt handler) and which is usually stopped with SIGTERM.
    ``signum`` is the signal that came (the exit code is 128 + it)."""

    def __init__(self) -> None:
        self.signum = signal.SIGINT
        self._handlers: dict[int, Any] = {}  # signal -> the handler it had before catch()

    def _interrupt(self, signum: int, frame: Any) -> None:
        self.signum = signum
        raise KeyboardInterrupt

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
