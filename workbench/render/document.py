"""A document's own markdown, made safe (the side panel).

A document is shown with its formatting (headings, emphasis, lists, tables, code), not as escaped
source with literal `**`. It is parsed as CommonMark (markdown-it-py) and written out again as
markdown that can only format: its text escaped like `escape_markdown`, links reduced to their text,
images to "[image: alt]", raw HTML shown as text, code in fences longer than any backtick run inside.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right

from .escaping import display_lines, escape_all, marked, no_autolinks
from .highlight import HIGHLIGHT_COLORS

#: Heading levels are lowered by this much: a document's `#` title must not outshout the panel's own.
HEADING_SHIFT = 3


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
            return [no_autolinks(escape_all(x)) + "  " for x in node.content.rstrip("\n").split("\n") if x.strip()]
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
                whole = _HIGHLIGHT.fullmatch(inner)  # all of it highlighted: the mark goes inside, so the box can join
                out.append(f":{whole[1]}-background[{mark}{whole[2]}{mark}]" if whole
                           else f"{mark}{inner}{mark}" if inner.strip() else inner)
            elif kind == "code_inline":
                fence, code = _fenced(n.content.replace("|", "\\|") if self.in_table else n.content, 1)
                pad = " " if code.startswith("`") or code.endswith("`") or not code.strip() else ""
                out.append(f"{fence}{pad}{code}{pad}{fence}" if code else "")
            elif kind == "image":  # never fetched: its description as text
                out.append(escape_all("[image: ") + self.runs(n.children) + escape_all("]"))
            elif kind == "html_inline":
                out.append(self.literal(n.content))
            else:  # a link's text, without its target; anything else by its children
                out.append(self.runs(n.children))
        return _joined("".join(out))

    def literal(self, content: str) -> str:
        """`content` escaped, highlighted where the spans cover its place in the source."""
        at = self.text.find(content, self.cursor, self.limit) if content else -1
        if at < 0:  # an entity or escape changed it: shown without highlight
            return no_autolinks(escape_all(content))
        self.cursor = at + len(content)
        return no_autolinks(marked(self.text, at, at + len(content), self.spans, self.colors))


#: One highlight of `render.escaping.marked`: `:orange-background[…]`, its text escaped (no `]` inside but `\]`).
_HIGHLIGHT = re.compile(r":(\w+)-background\[((?:\\.|[^\]\\])*)\]")
_ADJACENT = re.compile(r":(\w+)-background\[((?:\\.|[^\]\\])*)\]:\1-background\[")


def _joined(md: str) -> str:
    """`md` with highlights of one colour that touch made one box: "Pick **SAML 2.0**." highlighted reads as one
    passage, not three boxes with gaps around the bold words."""
    while True:
        joined = _ADJACENT.sub(r":\1-background[\2", md)
        if joined == md:
            return md
        md = joined


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
