"""SIGTERM and Ctrl-C for long commands: the first one asks the work to stop cleanly, a second one stops at once.

`eval` runs for minutes with a local model; a user's Ctrl-C, a CI timeout or a container stop sends
SIGINT or SIGTERM. The first such signal only records itself in a `batch.Stop` (the batch looks at it
every fraction of a second, writes its finished turns and returns); the handler writes nothing and
takes no lock, so it cannot break a write it interrupts. A second signal gets the default behaviour
(Ctrl-C: `KeyboardInterrupt`; SIGTERM: the process ends) for a user who will not wait for the write.

An interrupted command then ends with `exit_now`, not by returning: the turn in progress is still
running in a worker thread, possibly inside a native call (llama.cpp generating), and Python's shutdown
would stop that thread under the C++ code — measured with the `llamacpp` provider: the process aborted
("FATAL: exception not rethrown", exit -6) after writing everything. Everything worth keeping is written
by then; `exit_now` flushes stdout and stderr and leaves at once with the signal's exit code.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from contextlib import contextmanager
from typing import Iterator

SIGNALS = (signal.SIGINT, signal.SIGTERM)


def exit_code(name: str) -> int:
    """The shell's code for a command ended by signal `name` (128 + its number: 130 for SIGINT, 143 SIGTERM)."""
    return 128 + int(signal.Signals[name])


def exit_now(code: int) -> None:
    """Flush stdout and stderr and end the process with `code` at once, without Python's shutdown (see above)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


@contextmanager
def stop_on_signals(stop) -> Iterator[None]:
    """While inside, SIGINT and SIGTERM call `stop.request(name)` (only in the main thread, where Python
    runs signal handlers; elsewhere nothing changes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in SIGNALS}

    def restore() -> None:
        for sig, handler in previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)

    def handler(signum, frame) -> None:
        if not stop.requested:
            stop.request(signal.Signals(signum).name)
            return
        restore()  # a second signal: what it does by default
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    for sig in SIGNALS:
        signal.signal(sig, handler)
    try:
        yield
    finally:
        restore()
