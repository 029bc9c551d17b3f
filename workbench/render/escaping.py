"""Untrusted text made safe to show: literal markdown, model markdown that cannot form a link, plain text for
widgets and chart labels, and link targets limited to http(s).

Corpus text and model output are untrusted. Markdown can smuggle links (`[x](javascript:…)`),
remote images (`![](http://tracker/…)`), raw HTML, autolinks and Streamlit directives
(`:red[…]`), so every renderer goes through these escapers and builds the only links itself,
from citations that validated against the allow-list, with `safe_url` targets.
"""

from __future__ import annotations

import functools
import re
from typing import Any
from urllib.parse import urlsplit

from ..terminal import neutralize

SAFE_SCHEMES = ("http", "https")


def safe_url(url: str | None) -> str | None:
    """`url` if it is an absolute http(s) link, else None (neutralises javascript:, data:, …)."""
    if not url:
        return None
    try:
        parts = urlsplit(url.strip())
    except ValueError:
        return None
    if parts.scheme.lower() in SAFE_SCHEMES and parts.netloc:
        return url.strip()
    return None



_ALL_PUNCT = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
#: Characters that can create links, images, HTML, code, maths, entities or directives. Emphasis,
#: lists, headings and tables stay as formatting: they cannot carry a link target.
_LINK_PUNCT = frozenset("\\[]()!<>`$&:@")
_WWW = re.compile(r"(?i)\b(www)\.")
#: GFM's auto-link literals (`http://…`, `www.…`, `name@host.tld`) are found in the *rendered* text,
#: after escapes are resolved, so `http\\:\\/\\/host` still became a link. An invisible WORD JOINER
#: (U+2060, not a word character) placed where each pattern needs contiguous characters breaks it:
#: before the `:` of `scheme://`, between `www` and `.`, and before `@`.
WORD_JOINER = "\u2060"
_AUTOLINK_TRIGGER = re.compile(r"(?i)(?<=[a-z0-9])(?=\\:(?:\\?/){2})|(?<=www)(?=\\\.)|(?=\\@)")


def no_autolinks(md: str) -> str:
    return _AUTOLINK_TRIGGER.sub(WORD_JOINER, md)


#: The longest line the app renders: a longer one is wrapped (at its last blank within the final half of
#: the width, else hard) before it reaches the browser, which lays out one paragraph of right-to-left or
#: overridden text in super-linear time (a 200,000-character line froze a tab for minutes).
MAX_LINE_CHARS = 1_000


def _wrap_points(text: str, lo: int, hi: int, width: int = MAX_LINE_CHARS):
    """(start, end) pieces of the line `text[lo:hi]`, each at most `width` characters."""
    while hi - lo > width:
        cut = lo + width
        blank = max(text.rfind(" ", lo + width // 2, cut), text.rfind("\t", lo + width // 2, cut))
        cut = blank + 1 if blank >= 0 else cut
        yield lo, cut
        lo = cut
    yield lo, hi


def display_lines(text: str) -> list[tuple[int, int]]:
    """(start, end) of every line of `text` as the app shows it: its lines, long ones wrapped."""
    out: list[tuple[int, int]] = []
    offset = 0
    for line in text.split("\n"):
        out += _wrap_points(text, offset, offset + len(line))
        offset += len(line) + 1
    return out


def display_text(text: str, wrap: str = "\n") -> str:
    """Untrusted text for a widget that shows it as is (a table cell, a JSON value, a plain-text line):
    control characters and bidi overrides as visible escapes (`terminal.neutralize`, as the CLI shows
    them), lines longer than `MAX_LINE_CHARS` wrapped (`wrap` joins the pieces of a wrapped line)."""
    text = neutralize(text)
    lines = text.split("\n")
    return "\n".join(wrap.join(line[a:b] for a, b in _wrap_points(line, 0, len(line))) for line in lines)


def display_value(value: Any) -> Any:
    """`value` with every string in it, keys and nested ones included, through `display_text`."""
    if isinstance(value, str):
        return display_text(value)
    if isinstance(value, dict):
        return {display_value(k): display_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [display_value(v) for v in value]
    return value


def plotly_text(text: str) -> str:
    """`text` as a literal plotly label: plotly draws `<a href>` (also mailto:), `<b>` and `style=` in
    labels, so questions, titles and SQL results are entity-escaped (plotly shows `&lt;` as `<`)."""
    return display_text(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def escape_all(text: str) -> str:
    return "".join("\\" + ch if ch in _ALL_PUNCT else ch for ch in neutralize(text))


def escape_markdown(text: str) -> str:
    """`text` as literal markdown: every ASCII punctuation escaped, line breaks kept as hard breaks,
    auto-links broken, control characters and bidi overrides visible (`terminal.neutralize`), lines longer
    than `MAX_LINE_CHARS` wrapped."""
    return _escaped(text) if len(text) <= CACHED_ESCAPE_CHARS else literal_markdown(text, [], {})


#: Strings up to this long are escaped once and kept (4,096 at most): the app redraws every turn's titles
#: and reasons on every rerun (benchmarks/app_speed.py).
CACHED_ESCAPE_CHARS = 2000


@functools.lru_cache(maxsize=4096)
def _escaped(text: str) -> str:
    return literal_markdown(text, [], {})


#: An inline code span of an answer (`SAML 2.0`): one line, no backtick inside, at most this long.
MAX_CODE_SPAN_CHARS = 200
_CODE_SPAN = re.compile(r"`([^`\n]{1,%d})`" % MAX_CODE_SPAN_CHARS)


def safe_markdown(text: str) -> str:
    """Model markdown with emphasis, lists, headings and inline code kept but no way to form a link (auto-links
    included), an image or HTML; controls visible and long lines wrapped as in `display_text`. An inline code span
    is drawn as code, not as literal backticks: its text is literal there (no link, HTML, maths or directive forms in
    code), with its controls made visible."""
    out, pos = [], 0
    for m in _CODE_SPAN.finditer(text):
        out += [_safe_text(text[pos:m.start()]), "`" + display_text(m.group(1), " ") + "`"]
        pos = m.end()
    return "".join(out + [_safe_text(text[pos:])])


def _safe_text(text: str) -> str:
    out = "".join("\\" + ch if ch in _LINK_PUNCT else ch for ch in display_text(text, "  \n"))
    return no_autolinks(_WWW.sub(r"\1\\.", out))  # GFM would auto-link `www.host`


#: An ATX heading (`# Sources`) or a setext underline (`Sources` over `---` / `===`) at the start of a line,
#: also inside list items (`- # Sources`).
_HEADING = re.compile(r"(?m)^([ \t]*(?:(?:[-*+]|\d{1,9}[.)])[ \t]+)*)(#{1,6}(?=[ \t]|$)|=+[ \t]*$|-+[ \t]*$)")


def demote_headings(md: str) -> str:
    """Model markdown whose headings stay literal text: an answer cannot draw a `# Sources` heading that
    passes for the app's own sources row (docs/security.md)."""
    return _HEADING.sub(lambda m: m.group(1) + "\\" + m.group(2), md)


def marked(text: str, lo: int, hi: int, spans: list[tuple[int, int, str]], colors: dict[str, str]) -> str:
    """`text[lo:hi]` as literal markdown with the parts inside `spans` on a coloured background."""
    pieces: list[str] = []
    pos = lo
    for s, e, kind in spans:
        s, e = max(s, lo), min(e, hi)
        if s >= e or s < pos:
            continue
        pieces.append(escape_all(text[pos:s]))
        pieces.append(f":{colors.get(kind, 'orange')}-background[{escape_all(text[s:e])}]")
        pos = e
    pieces.append(escape_all(text[pos:hi]))
    return "".join(pieces)


def literal_markdown(text: str, spans: list[tuple[int, int, str]], colors: dict[str, str]) -> str:
    """`text` as literal markdown (see `escape_markdown`) with each span on the background its kind has in
    `colors`.

    Works line by line because a directive cannot span a line break; leading blanks are dropped
    so no line turns into an indented code block.
    """
    text = text.replace("\r\n", "\n")
    out_lines: list[str] = []
    for lo, hi in display_lines(text):  # long lines wrapped (`MAX_LINE_CHARS`)
        line = text[lo:hi]
        lo += len(line) - len(line.lstrip(" \t"))
        out_lines.append(marked(text, lo, hi, spans, colors) if text[lo:hi].strip() else "")
    return no_autolinks("  \n".join(out_lines))
