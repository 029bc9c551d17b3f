"""Text for a terminal: control characters from documents, questions and model output made visible.

Untrusted text printed raw can drive the terminal: `ESC ] 52 ; …` writes the clipboard, CSI
sequences clear or recolour the screen, a carriage return overwrites what the line said, C1
controls (U+0080–U+009F, e.g. U+009B as a one-byte CSI) do the same on some terminals, and bidi
overrides (U+202E …) make text read differently than it is. `neutralize` shows each as a visible
escape (`\\x1b`, `\\u202e`) and keeps tabs and line breaks. The CLI applies it to what it prints for
people (answers, tables, messages); `--json` and `--csv` output keep the data exactly. The app shows
the same escapes: `render.py` applies it to everything the app draws (docs/security.md).
"""

from __future__ import annotations

import re

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
