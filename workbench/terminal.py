"""Text for a terminal: control characters from documents, questions and model output made visible.

Untrusted text printed raw can drive the terminal: `ESC ] 52 ; …` writes the clipboard, CSI
sequences clear or recolour the screen, a carriage return overwrites what the line said, C1
controls (U+0080–U+009F, e.g. U+009B as a one-byte CSI) do the same on some terminals, and bidi
overrides (U+202E …) make text read differently than it is. `neutralize` shows each as a visible
escape (`\\x1b`, `\\u202e`) and keeps tabs and line breaks. The CLI applies it to what it prints for
people (answers, tables, messages); `--json` and `--csv` output keep the data exactly. The app shows
the same escapes: `workbench/render/escaping.py` applies it to everything the app draws (docs/security.md).
"""

from __future__ import annotations

import re
import shutil
import sys
import threading

# bidi marks, embeddings, overrides and isolates, and the Unicode line and paragraph separators
_SPOOFING = "\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_CONTROLS = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_SPOOFING}]")
_ANY_CONTROL = re.compile(f"[\x00-\x1f\x7f-\x9f{_SPOOFING}]")  # tab and newline too


def _visible(code: int) -> str:
    return {0x0D: "\\r"}.get(code) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


#: Each character `_CONTROLS` matches → its visible escape: one `str.translate`, linear and in C (a
#: `re.sub` callback per character took seconds on a 200,000-character run of overrides).
_ESCAPES = {code: _visible(code) for code in range(0x2070) if _CONTROLS.match(chr(code))}


def all_visible(text: str) -> str:
    """`text` with every control character, tab and newline included, as a visible escape: a document id
    (corpus.py) is one line of printable text wherever it is shown, linked or stored."""
    return _ANY_CONTROL.sub(lambda m: _visible(ord(m.group())), text)


def neutralize(text: str) -> str:
    """`text` with every terminal control character but tab and newline as a visible escape."""
    return text.replace("\r\n", "\n").translate(_ESCAPES)


class StatusLine:
    """A status that changes (a batch's progress) on `stream` (default: stderr): on a terminal one line
    rewritten in place, cut to the terminal's width; elsewhere (a log file, a pipe, CI) one line per
    update, so a log shows every step. Text is `neutralize`d (it may quote a question) and kept on one
    line. Safe from several threads; a stream that fails (closed, a broken pipe) is ignored from then on."""

    def __init__(self, stream=None):
        self.stream = stream if stream is not None else sys.stderr
        try:
            self.tty = bool(self.stream.isatty())
        except (AttributeError, ValueError, OSError):
            self.tty = False
        self._lock = threading.Lock()
        self._shown = False
        self._broken = False

    def show(self, text: str) -> None:
        line = neutralize(text).replace("\n", " ")
        if self.tty:
            width = shutil.get_terminal_size().columns - 1
            line = "\r\x1b[K" + (line if len(line) <= width else line[: max(1, width - 1)] + "…")
        else:
            line += "\n"
        self._write(line)
        self._shown = True

    def clear(self) -> None:
        """Take the line away (a terminal), so what follows starts on a clean line."""
        if self.tty and self._shown:
            self._write("\r\x1b[K")
            self._shown = False

    def _write(self, text: str) -> None:
        with self._lock:
            if self._broken:
                return
            try:
                self.stream.write(text)
                self.stream.flush()
            except (OSError, ValueError):
                self._broken = True
