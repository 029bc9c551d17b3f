"""Turn a payload into what a client shows: source chips, clickable citations, a summary line.

Clients show a chip only where `consulted` is not `false`; an absent flag means *show*. So a new
client with an old server (no flag) falls back to showing every source, and an old client that
ignores the flag still gets a working lookup table for inline links (docs/design.md §2).
"""

from __future__ import annotations

import functools
import json
import re
from bisect import bisect_left, bisect_right
from typing import Any
from urllib.parse import urlsplit

from .payload import CitationEntry, Payload, Rejection, Source
from .terminal import neutralize
from .text import plain, sentences
from .types import TurnRecord

SAFE_SCHEMES = ("http", "https")
#: The three sets, in the order every view shows them (docs/design.md §1).
SETS = ("retrieved", "cited", "consulted")
#: One colour per set, and one for rejected citations: the app's badges and charts and the notebooks'
#: tables and charts all take them from here.
SET_COLORS = {"retrieved": "#9aa5b1", "cited": "#4c78a8", "consulted": "#2ca02c"}
REJECTED_COLOR = "#e45756"
#: Verdicts of verification by ablation (docs/design.md §9), as shown, in the order they are listed.
VERDICT_LABELS = {"load_bearing": "load-bearing", "decorative": "decorative", "hidden_influence": "hidden influence",
                  "no_effect": "no effect", "unstable": "unstable"}
VERDICT_MEANINGS = {
    "load_bearing": "the answer changed without it: it lost a claim this document supported, or drifted below the "
                    "similarity threshold",
    "decorative": "cited or consulted, but the answer's claims survive without it (e.g. a \"see also\" link)",
    "hidden_influence": "neither cited nor consulted, yet the answer changed without it",
    "no_effect": "neither cited nor consulted, and the answer stays the same without it",
    "unstable": "no verdict earned: re-running the turn with nothing withheld already changed the answer",
}


def source_chips(payload: Payload) -> list[Source]:
    """The sources row: every source whose `consulted` flag is not explicitly false."""
    return [s for s in payload.sources if s.consulted is not False]


def link_table(payload: Payload) -> dict[str, Source]:
    """doc_id → source entry, for making inline citations clickable (the whole cited set)."""
    return {s.doc_id: s for s in payload.sources}


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


def verdicts(payload: Payload) -> dict[str, str]:
    """doc_id → verdict of the payload's verification by ablation; empty when the turn was not verified
    (no `verification`: an old server, or simply unverified)."""
    v = payload.verification
    return {k: x for k, x in v.verdicts.items() if x in VERDICT_LABELS} if v is not None else {}


def sources_row(payload: Payload) -> str:
    chips = source_chips(payload)
    if not chips:
        return "Sources: none (nothing was read to answer this)"
    judged = verdicts(payload)
    parts = []
    for s in chips:
        tag = f" [{s.label}]" if s.label and s.label != "Source text" else ""
        verdict = f" ({VERDICT_LABELS[judged[s.doc_id]]})" if s.doc_id in judged else ""
        parts.append(f"{s.title or s.doc_id}{tag} <{s.url or s.doc_id}>{verdict}")
    return "Sources: " + " · ".join(parts)


def doc_titles(payload: Payload) -> dict[str, str]:
    """doc_id → title (the id when it has none) of every retrieved document of the payload."""
    return {d.doc_id: d.title or d.doc_id for d in payload.documents}


def by_verdict(payload: Payload) -> list[tuple[str, str, list[str]]]:
    """(verdict, label, doc ids) for each verdict the payload's verification gave, in `VERDICT_LABELS` order."""
    judged = verdicts(payload)
    groups = [(v, label, [d for d, x in judged.items() if x == v]) for v, label in VERDICT_LABELS.items()]
    return [g for g in groups if g[2]]


def verification_lines(payload: Payload) -> list[str]:
    """The verification by ablation in words: method, control, cost, then the documents of each verdict;
    empty when the turn was not verified."""
    v = payload.verification
    if v is None:
        return []
    titles = doc_titles(payload)
    cost = f"{or_unknown(v.extra_turns)} re-runs, {or_unknown(v.extra_calls)} extra model calls"
    if v.latency_ms is not None:
        cost += f", {v.latency_ms:.0f} ms"
    control = "control stable" if v.control_stable else "control UNSTABLE: no document earned a verdict"
    lines = [f"Verified by {v.method} ({control}; {cost}):"]

    def names(ids: list[str], most: int = 6) -> str:
        shown = " · ".join(titles.get(d, d) for d in ids[:most])
        return shown + (f" · and {len(ids) - most} more" if len(ids) > most else "")

    for _, label, docs in by_verdict(payload):
        lines.append(f"  {label}: {names(docs)}")
    for ids, what in ((v.skipped, f"over the budget of {or_unknown(v.budget)} re-runs"), (v.failed, "re-run failed")):
        if ids:
            lines.append(f"  not verified ({what}): {names(list(ids))}")
    return lines


def or_unknown(value: Any) -> Any:
    """`value`, or "?" when a payload did not say (an older server's verification)."""
    return "?" if value is None else value


def summary_line(payload: Payload) -> str:
    sets, rejected = payload.sets, payload.rejected_citations
    line = (f"retrieved {len(sets.retrieved)} · cited {len(sets.cited)} · "
            f"consulted {len(sets.consulted)} · rejected citations {len(rejected)}")
    for r in rejected:
        near = f" (nearest retrieved: {r.nearest_doc_id}, edit distance {r.edit_distance})" \
            if r.nearest_doc_id else ""
        line += f"\n  rejected {r.target}: {r.reason}{near}"
    return line


# --- safe markdown for clients that render markdown (the app) -----------------------------------
#
# Corpus text and model output are untrusted. Markdown can smuggle links (`[x](javascript:…)`),
# remote images (`![](http://tracker/…)`), raw HTML, autolinks and Streamlit directives
# (`:red[…]`), so every renderer goes through these two escapers and builds the only links itself,
# from citations that validated against the allow-list, with `safe_url` targets.

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


def _no_autolinks(md: str) -> str:
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


def _escape_all(text: str) -> str:
    return "".join("\\" + ch if ch in _ALL_PUNCT else ch for ch in neutralize(text))


def escape_markdown(text: str) -> str:
    """`text` as literal markdown: every ASCII punctuation escaped, line breaks kept as hard breaks,
    auto-links broken, control characters and bidi overrides visible (`terminal.neutralize`), lines longer
    than `MAX_LINE_CHARS` wrapped."""
    return _escaped(text) if len(text) <= CACHED_ESCAPE_CHARS else highlighted_markdown(text, [])


#: Strings up to this long are escaped once and kept (4,096 at most): the app redraws every turn's titles
#: and reasons on every rerun (benchmarks/app_speed.py).
CACHED_ESCAPE_CHARS = 2000


@functools.lru_cache(maxsize=4096)
def _escaped(text: str) -> str:
    return highlighted_markdown(text, [])


def safe_markdown(text: str) -> str:
    """Model markdown with emphasis, lists and headings kept but no way to form a link (auto-links
    included), an image or HTML; controls visible and long lines wrapped as in `display_text`."""
    out = "".join("\\" + ch if ch in _LINK_PUNCT else ch for ch in display_text(text, "  \n"))
    return _no_autolinks(_WWW.sub(r"\1\\.", out))  # GFM would auto-link `www.host`


#: An ATX heading (`# Sources`) or a setext underline (`Sources` over `---` / `===`) at the start of a line,
#: also inside list items (`- # Sources`).
_HEADING = re.compile(r"(?m)^([ \t]*(?:(?:[-*+]|\d{1,9}[.)])[ \t]+)*)(#{1,6}(?=[ \t]|$)|=+[ \t]*$|-+[ \t]*$)")


def demote_headings(md: str) -> str:
    """Model markdown whose headings stay literal text: an answer cannot draw a `# Sources` heading that
    passes for the app's own sources row (docs/security.md)."""
    return _HEADING.sub(lambda m: m.group(1) + "\\" + m.group(2), md)


def _badge(color: str, text: str) -> str:
    return f":{color}-badge[{escape_markdown(text)}]"


def citation_entries(payload: Payload) -> list[dict[str, Any]]:
    """The clickable citations of an answer, in order of first appearance, one per target.

    Each entry has `key` (stable within the turn), `marker` (the badge shown inline: the `[n]` of
    an excerpt, else 1, 2, … per cited document — letters in excerpt mode so they cannot clash),
    `doc_id`, `title`, `url` (safe or None), `n` and `label`.
    """
    table = link_table(payload)
    docs = {d.doc_id: d for d in payload.documents}
    entries: list[dict[str, Any]] = []
    seen: set[str] = set()
    links = 0
    for c in payload.citations:
        if not c.valid or not c.doc_id:
            continue
        n = c.n
        key = f"[{n}]" if n is not None else c.doc_id
        if key in seen:
            continue
        seen.add(key)
        if n is not None:
            marker = str(n)
        else:
            links += 1
            marker = str(links) if payload.mode != "excerpts" else chr(ord("a") + (links - 1) % 26)
        src = table.get(c.doc_id) or docs.get(c.doc_id)
        excerpt = c.excerpt or {}
        entries.append({
            "key": key, "marker": marker, "doc_id": c.doc_id, "n": n,
            "title": (src.title if src else None) or excerpt.get("title") or c.doc_id,
            "url": safe_url(src.url if src else None), "label": (src.label if src else None) or excerpt.get("label"),
        })
    return entries


def read_in_turn(position: int | None, turn_id: str | None) -> str:
    """Which earlier turn had a document: "read in turn 1" (its position; its id when the position is unknown)."""
    return f"read in turn {position or turn_id or '?'}"


def rejection_text(c: CitationEntry | Rejection) -> str:
    """Why a citation was rejected, in words: "not retrieved (nearest retrieved: x, edit distance 1)"."""
    if c.reason == "out_of_range":
        return f"{c.target} is out of range (no such excerpt)"
    if c.reason == "not_in_context":  # docs/design.md §11: an earlier turn had it, the policy dropped it
        return f"not in context ({read_in_turn(c.position, c.turn_id)}, dropped by the context policy)"
    near = ""
    if c.nearest_doc_id:
        near = f" (nearest retrieved: {c.nearest_doc_id}, edit distance {c.edit_distance})"
    return f"not retrieved{near}"


def _link_text(span: str, target: str) -> str:
    if span.startswith("<"):  # autolink: the text is the target
        return target
    cut = span.rfind("](", 0, max(span.rfind(target), 1))
    return span[1:cut] if cut > 0 else target


def answer_markdown(payload: Payload, targets: dict[str, str] | None = None) -> str:
    """The answer as safe markdown: valid citations become links (http(s) only) with a numbered
    badge matching `citation_entries`; rejected ones become plain text with a warning badge and
    the reason. Everything else is the model's text through `safe_markdown`.

    `targets` (citation key → link target, e.g. the app's `#…` links that open its side panel) replaces
    the documents' URLs; then every valid citation is a link, an excerpt's `[n]` badge too."""
    answer = payload.answer or ""
    markers = {e["key"]: e for e in citation_entries(payload)}
    groups: dict[tuple[int, int], list[CitationEntry]] = {}
    for c in payload.citations:
        groups.setdefault((c.start, c.end), []).append(c)
    out: list[str] = []
    pos = 0
    for (start, end), cs in sorted(groups.items()):
        if start < pos:  # overlapping spans cannot come from provenance; keep the text safe anyway
            continue
        out.append(safe_markdown(answer[pos:start]))
        span = answer[start:end]
        if cs[0].n is not None:  # one `[1, 2]` marker may hold several citations
            parts = []
            for c in cs:
                if c.valid:
                    badge = _badge("blue", markers[f"[{c.n}]"]["marker"])
                    href = (targets or {}).get(f"[{c.n}]")
                    parts.append(f"[{badge}](<{href}>)" if href and not re.search(r"[\s<>]", href) else badge)
                else:
                    parts.append(_badge("orange", f"⚠ {c.target} rejected: {rejection_text(c)}"))
            out.append(" ".join(parts))
        else:
            c = cs[0]
            text = safe_markdown(_link_text(span, c.target))
            entry = markers.get(c.doc_id or "") if c.valid else None
            if entry is not None:
                url = entry["url"] if targets is None else targets.get(entry["key"])
                link = f"[{text}](<{url}>)" if url and not re.search(r"[\s<>]", url) else text
                out.append(f"{link} {_badge('blue', entry['marker'])}")
            else:
                out.append(f"{text} {_badge('orange', '⚠ rejected citation: ' + rejection_text(c))}")
        pos = end
    out.append(safe_markdown(answer[pos:]))
    return demote_headings("".join(out))


# --- highlighting the evidence in a document -----------------------------------------------------


def evidence_passages(record: TurnRecord, doc_id: str) -> list[tuple[str, str]]:
    """What of `doc_id` the model saw or quoted in one turn, as (kind, text) pairs:
    `excerpt` (a numbered excerpt), `snippet` (a search result's passage), `quoted` (an answer
    sentence; only those found in the document get highlighted)."""

    out: list[tuple[str, str]] = [("excerpt", e.text) for e in record.excerpts if e.doc_id == doc_id and e.text]
    for call in record.tool_calls:
        out += [("snippet", r.snippet) for r in call.results if r.doc_id == doc_id and r.snippet]
    out += [("quoted", s) for s in sentences(plain(record.answer or "")) if len(s.split()) >= 4]
    return out


def _loose_pattern(passage: str) -> re.Pattern | None:
    words = passage.split()
    if not words:
        return None
    return re.compile(r"\s+".join(re.escape(w) for w in words))


def highlight_spans(text: str, passages: list[tuple[str, str]]) -> list[tuple[int, int, str]]:
    """Non-overlapping (start, end, kind) spans of `text` matching the passages, whitespace-insensitively.

    A passage that does not occur whole (chunkers and answers reflow text) is matched sentence by
    sentence. Earlier kinds in `passages` win overlaps only where they came first; `quoted` wins
    over `snippet` so the part the answer used stands out inside the larger passage.
    """

    priority = {"quoted": 0, "excerpt": 1, "snippet": 2}
    found: list[tuple[int, int, str]] = []
    for kind, passage in passages:
        pieces = [passage] + [s for s in sentences(passage) if len(s.split()) >= 4]
        for piece in pieces:
            pat = _loose_pattern(piece)
            m = pat.search(text) if pat else None
            if m:
                found.append((m.start(), m.end(), kind))
                if piece is passage:
                    break
    found.sort(key=lambda s: (priority.get(s[2], 9), s[0]))
    taken: list[tuple[int, int, str]] = []
    for s, e, kind in found:
        # cut the new span around the ones already taken (higher priority)
        cuts = [(s, e)]
        for ts, te, _ in taken:
            cuts = [p for a, b in cuts for p in ((a, min(b, ts)), (max(a, te), b)) if p[0] < p[1]]
        for a, b in cuts:
            piece = text[a:b]
            if piece.strip():  # no highlight on bare whitespace at a cut
                a += len(piece) - len(piece.lstrip())
                b -= len(piece) - len(piece.rstrip())
                taken.append((a, b, kind))
    return sorted(taken)


#: The background of each kind of evidence passage (the panel's legend names them).
HIGHLIGHT_COLORS = {"quoted": "orange", "excerpt": "blue", "snippet": "blue"}


def highlighted_markdown(text: str, spans: list[tuple[int, int, str]],
                         colors: dict[str, str] | None = None) -> str:
    """`text` as literal markdown (see `escape_markdown`) with each span on a coloured background.

    Works line by line because a directive cannot span a line break; leading blanks are dropped
    so no line turns into an indented code block.
    """
    colors = colors or HIGHLIGHT_COLORS
    text = text.replace("\r\n", "\n")
    out_lines: list[str] = []
    for lo, hi in display_lines(text):  # long lines wrapped (`MAX_LINE_CHARS`)
        line = text[lo:hi]
        lo += len(line) - len(line.lstrip(" \t"))
        out_lines.append(_marked(text, lo, hi, spans, colors) if text[lo:hi].strip() else "")
    return _no_autolinks("  \n".join(out_lines))


# --- a document's own markdown, made safe (the side panel) --------------------------------------
#
# A document is shown with its formatting (headings, emphasis, lists, tables, code), not as escaped
# source with literal `**`. It is parsed as CommonMark (markdown-it-py) and written out again as
# markdown that can only format: its text escaped like `escape_markdown`, links reduced to their text,
# images to "[image: alt]", raw HTML shown as text, code in fences longer than any backtick run inside.

#: Heading levels are lowered by this much: a document's `#` title must not outshout the panel's own.
HEADING_SHIFT = 3


def _marked(text: str, lo: int, hi: int, spans: list[tuple[int, int, str]], colors: dict[str, str]) -> str:
    """`text[lo:hi]` as literal markdown with the parts inside `spans` on a coloured background."""
    pieces: list[str] = []
    pos = lo
    for s, e, kind in spans:
        s, e = max(s, lo), min(e, hi)
        if s >= e or s < pos:
            continue
        pieces.append(_escape_all(text[pos:s]))
        pieces.append(f":{colors.get(kind, 'orange')}-background[{_escape_all(text[s:e])}]")
        pos = e
    pieces.append(_escape_all(text[pos:hi]))
    return "".join(pieces)


def _fenced(code: str, ticks: int) -> tuple[str, str]:
    run = max((len(r) for r in re.findall(r"`+", code)), default=0)
    fence = "`" * max(ticks, run + 1)
    return fence, code


class _DocumentWriter:
    def __init__(self, text: str, spans: list[tuple[int, int, str]], colors: dict[str, str]):
        self.text, self.spans, self.colors = text, spans, colors
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)] + [len(text) + 1]
        self.in_table = False

    def blocks(self, nodes, tight: bool = False) -> list[str]:
        out: list[str] = []
        for node in nodes:
            lines = self.block(node)
            if not lines:
                continue
            if out and not tight:
                out.append("")
            out += lines
        return out

    def block(self, node) -> list[str]:
        kind = node.type
        if kind == "paragraph":
            return self.inline(node.children[0]).split("\n") if node.children else []
        if kind == "heading":
            level = min(6, int(node.tag[1]) + HEADING_SHIFT)
            return ["#" * level + " " + self.inline(node.children[0]).replace("\n", " ")]
        if kind in ("bullet_list", "ordered_list"):
            start = int(node.attrs.get("start", 1)) if kind == "ordered_list" else 1
            tight = all(c.hidden for item in node.children for c in item.children if c.type == "paragraph")
            out: list[str] = []
            for i, item in enumerate(node.children):
                marker = "- " if kind == "bullet_list" else f"{start + i}. "
                inner = self.blocks(item.children, tight) or [""]
                if out and not tight:
                    out.append("")
                out += [marker + inner[0]] + [(" " * len(marker) + x) if x else "" for x in inner[1:]]
            return out
        if kind == "blockquote":
            return [f"> {x}" if x else ">" for x in self.blocks(node.children)]
        if kind in ("fence", "code_block"):
            fence, code = _fenced(node.content.rstrip("\n"), 3)
            return [fence, *code.split("\n"), fence]
        if kind == "hr":
            return ["***"]
        if kind == "table":
            rows = [r for part in node.children for r in part.children]
            self.in_table = True  # a `|` in a cell's code must not end the cell
            cells = [[self.inline(c.children[0]).replace("\n", " ") if c.children else "" for c in r.children]
                     for r in rows]
            self.in_table = False
            if not cells:
                return []
            width = max(len(r) for r in cells)
            lines = ["| " + " | ".join(r + [""] * (width - len(r))) + " |" for r in cells]
            return [lines[0], "|" + "---|" * width, *lines[1:]]
        if kind == "html_block":  # shown as text, line by line
            return [_no_autolinks(_escape_all(x)) + "  " for x in node.content.rstrip("\n").split("\n") if x.strip()]
        return self.blocks(node.children) if node.children else []

    def inline(self, node) -> str:
        lo, hi = 0, len(self.text)
        if node.map:
            lo = self.line_starts[node.map[0]]
            hi = min(len(self.text), self.line_starts[min(node.map[1], len(self.line_starts) - 1)])
        self.cursor, self.limit = lo, hi
        return self.runs(node.children)

    def runs(self, nodes) -> str:
        out: list[str] = []
        for n in nodes:
            kind = n.type
            if kind == "text":
                out.append(self.literal(n.content))
            elif kind == "softbreak":  # a line break of the source stays one, as everywhere else the app shows
                out.append("  \n")  # text (and a wrapped long line, `_wrapped_source`, breaks where it was cut)
            elif kind == "hardbreak":
                out.append("  \n")
            elif kind in ("strong", "em", "s"):
                mark = {"strong": "**", "em": "*", "s": "~~"}[kind]
                inner = self.runs(n.children)
                out.append(f"{mark}{inner}{mark}" if inner.strip() else inner)
            elif kind == "code_inline":
                fence, code = _fenced(n.content.replace("|", "\\|") if self.in_table else n.content, 1)
                pad = " " if code.startswith("`") or code.endswith("`") or not code.strip() else ""
                out.append(f"{fence}{pad}{code}{pad}{fence}" if code else "")
            elif kind == "image":  # never fetched: its description as text
                out.append(_escape_all("[image: ") + self.runs(n.children) + _escape_all("]"))
            elif kind == "html_inline":
                out.append(self.literal(n.content))
            else:  # a link's text, without its target; anything else by its children
                out.append(self.runs(n.children))
        return "".join(out)

    def literal(self, content: str) -> str:
        """`content` escaped, highlighted where the spans cover its place in the source."""
        at = self.text.find(content, self.cursor, self.limit) if content else -1
        if at < 0:  # an entity or escape changed it: shown without highlight
            return _no_autolinks(_escape_all(content))
        self.cursor = at + len(content)
        return _no_autolinks(_marked(self.text, at, at + len(content), self.spans, self.colors))


def _wrapped_source(text: str, spans: list[tuple[int, int, str]]) -> tuple[str, list[tuple[int, int, str]]]:
    """`text` with a line break inserted wherever `display_lines` wraps a long line, and `spans` moved with the
    text: in a paragraph the break renders as a space, and no line of the panel is longer than `MAX_LINE_CHARS`
    (a 200,000-character line froze a browser tab)."""

    cuts = [lo for lo, _ in display_lines(text) if lo > 0 and text[lo - 1] != "\n"]
    if not cuts:
        return text, spans
    bounds = [0, *cuts, len(text)]
    wrapped = "\n".join(text[a:b] for a, b in zip(bounds, bounds[1:]))
    return wrapped, [(s + bisect_right(cuts, s), e + bisect_left(cuts, e), k) for s, e, k in spans]


def document_markdown(text: str, spans: list[tuple[int, int, str]] = (),
                      colors: dict[str, str] | None = None) -> str:
    """A document's markdown, formatted but inert (see the section comment), with each span of `text`
    (from `highlight_spans`) on a coloured background."""
    from markdown_it import MarkdownIt
    from markdown_it.tree import SyntaxTreeNode

    text, spans = _wrapped_source(text.replace("\r\n", "\n"), list(spans))
    parser = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    writer = _DocumentWriter(text, sorted(spans), colors or HIGHLIGHT_COLORS)
    return "\n".join(writer.blocks(SyntaxTreeNode(parser.parse(text)).children))


# --- a turn's calls on one time axis (the app's tool-call timeline) ----------------------------------

#: Longest argument value shown in a tool call's one-line signature; a longer one ends in "…".
MAX_ARG_CHARS = 120


def call_signature(name: str, args: dict[str, Any] | None) -> str:
    """A tool call as one line, its arguments visible: `search(query="How do I configure SSO?", k=5)`.
    Plain text (escape it for markdown, `plotly_text` it for a chart)."""

    def shown(value: Any) -> str:
        text = json.dumps(value, ensure_ascii=False)
        return text if len(text) <= MAX_ARG_CHARS else text[:MAX_ARG_CHARS - 1] + "…"

    return f"{name}(" + ", ".join(f"{k}={shown(v)}" for k, v in (args or {}).items()) + ")"


def timeline(record: Any) -> list[dict[str, Any]]:
    """A turn's model and tool calls on one time axis from the turn's start, in the order the agent loop ran
    them (model call 1, the tool calls it asked for, model call 2, …; excerpt mode: the retrieval of the
    excerpts, then the model call), each as long as its recorded latency — the layout of the trace's spans
    (workbench/trace/spans.py). Rows: `kind` (model | tool | retrieval), `label`, `detail`, `start_ms`, `ms`."""
    rows: list[dict[str, Any]] = []
    clock = 0.0

    def add(kind: str, label: str, ms: float | None, detail: str = "") -> None:
        nonlocal clock
        ms = max(0.0, ms or 0.0)
        rows.append({"kind": kind, "label": label, "detail": detail, "start_ms": clock, "ms": ms})
        clock += ms

    models = list(record.model_calls)
    if record.excerpts:
        add("retrieval", f"retrieve {len(record.excerpts)} excerpts",
            (record.latency_ms or 0) - sum(c.latency_ms or 0 for c in models))
    tools = iter(enumerate(record.tool_calls, start=1))

    def tool(n: int, call: Any) -> None:
        cut = f" · cut: {call.cut.reason}" if getattr(call, "cut", None) is not None else ""
        add("tool", f"#{n} {call.name}", call.latency_ms, call_signature(call.name, call.args) + cut)

    for i, call in enumerate(models, start=1):
        add("model", f"model call {i}", call.latency_ms, " · ".join(
            x for x in (call.model, call.finish_reason and f"finish {call.finish_reason}") if x))
        for _ in range(call.n_tool_calls or 0):
            nxt = next(tools, None)
            if nxt is not None:
                tool(*nxt)
    for nxt in tools:  # a record without per-call tool counts: the tool calls end to end
        tool(*nxt)
    return rows


def document_lines(payload: Payload) -> list[str]:
    """Every retrieved document of a turn as a line of text (the CLI chat's `/sources`): title and id, how it
    was exposed, whether it was cited and consulted and why, and the earlier turn a carried one came from
    (docs/design.md §11); then each rejected citation."""
    lines = []
    for d in payload.documents:
        marks = [m for m, on in (("cited", d.cited), ("consulted", d.consulted)) if on]
        carried = f" · carried from turn {d.carried_position}" if d.carried_position else \
            f" · that exposure from turn {d.exposure_position}" if d.exposure_position else ""
        lines.append(f"  {d.title or d.doc_id} ({d.doc_id}) · {d.exposure}{carried} · "
                     f"{', '.join(marks) or 'not consulted'}" + (f": {d.reason}" if d.reason else ""))
    for r in payload.rejected_citations:
        where = f" (turn {r.position})" if r.position else ""
        lines.append(f"  rejected {r.target}: {r.reason}{where}")
    return lines or ["  nothing was retrieved"]
