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

The chat reads its lines with `Prompt`, which sees a Ctrl-C that `input()` can miss (see there).
"""

from __future__ import annotations

import os
import select
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


class Prompt:
    """`input(prompt)` for the chat, without its lost Ctrl-C: a Ctrl-C at any moment after the prompt is shown
    raises `KeyboardInterrupt` at once.

    `input()` writes the prompt and only then starts reading (CPython's `my_fgets`: `fgets`, and signals are
    checked only when the read fails with EINTR). A SIGINT that arrives between the two — a user quick on
    Ctrl-C, or any Ctrl-C on a loaded machine that preempts the chat right after the prompt — is recorded
    by Python's C handler, does not interrupt a read that has not started yet, and so waits for the next
    line: the chat sits at its prompt ignoring the Ctrl-C. Here every signal also writes a byte to a pipe
    (`signal.set_wakeup_fd`), and the wait is a `select` on the input and that pipe, so a signal that came
    before the wait began still ends it. Use as a context manager (it owns the pipe and the wakeup fd)."""

    def __init__(self, stream=None):
        self.stream = stream if stream is not None else sys.stdin
        self._pending = b""
        self._wakeup: tuple[int, int] | None = None
        self._previous = -1

    def __enter__(self) -> "Prompt":
        if threading.current_thread() is threading.main_thread():  # only the main thread may set it
            r, w = os.pipe()
            os.set_blocking(r, False)
            os.set_blocking(w, False)
            self._previous = signal.set_wakeup_fd(w, warn_on_full_buffer=False)
            self._wakeup = (r, w)
        return self

    def __exit__(self, *exc) -> None:
        if self._wakeup is not None:
            signal.set_wakeup_fd(self._previous)
            for fd in self._wakeup:
                os.close(fd)
            self._wakeup = None

    def _drain(self) -> bool:
        """Empty the wakeup pipe; whether a signal had written to it."""
        got = False
        while True:
            try:
                got = bool(os.read(self._wakeup[0], 512)) or got
            except BlockingIOError:
                return got

    def __call__(self, prompt: str) -> str:
        """The next line without its line break; `EOFError` at the end of the input, `KeyboardInterrupt` on Ctrl-C."""
        try:
            fd = self.stream.fileno()
        except (AttributeError, OSError, ValueError):  # not a file (a test's StringIO): nothing to wait on
            fd = None
        if self._wakeup is None or fd is None:
            return input(prompt)
        self._drain()  # signals already handled (a Ctrl-C while the last question was answered)
        sys.stdout.write(prompt)
        sys.stdout.flush()
        while b"\n" not in self._pending:
            ready, _, _ = select.select([fd, self._wakeup[0]], [], [])  # EINTR: the handler raises at once
            if self._wakeup[0] in ready and self._drain():
                raise KeyboardInterrupt  # it came before the wait began (the handler may not have run yet)
            if fd in ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    if not self._pending:
                        raise EOFError
                    break
                self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line.decode(getattr(self.stream, "encoding", None) or "utf-8", "surrogateescape")
