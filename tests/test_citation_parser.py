"""Citations are what a CommonMark parser calls links (issue 24, item 7).

Before the fix citations were found by patterns that masked only ```` ``` ```` fences and single-backtick
spans: a link inside a `~~~` fence, an indented code block, a ``` ``…`` ``` span, a four-backtick fence
or behind an escaped bracket counted as a citation, and made a snippet-only document consulted. The
property tests compare `extract_citations` with the link tokens of an independent markdown-it-py parser
(CommonMark preset), never with the function itself.
"""

from __future__ import annotations

import re
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from workbench.provenance import sources_payload, extract_citations
from workbench.types import Excerpt, ResultItem, ToolCall, TurnRecord

BASE = "https://help.example.com/articles/"

# The five shapes of the issue: each hides a link to the snippet-only document `a` in code or an escape.
IN_CODE = {
    "tilde fence": f"Configure it:\n\n~~~\n[A]({BASE}a)\n~~~\n",
    "indented code block": f"Configure it:\n\n    [A]({BASE}a)\n",
    "double-backtick span": f"Write ``[A]({BASE}a)`` in the file.",
    "four-backtick fence": f"````\n```\n[A]({BASE}a)\n```\n````\n",
    "escaped bracket": f"Type \\[A]({BASE}a) literally.",
}


def snippet_turn(answer: str, mode: str = "agent", excerpts=()) -> TurnRecord:
    call = ToolCall("search", "snippet", {"query": "x"}, (ResultItem("a", "A", BASE + "a"), ResultItem("b", "B", BASE + "b")))
    return TurnRecord("q", answer, mode, (call,) if mode == "agent" else (), tuple(excerpts))


@pytest.mark.parametrize("answer", IN_CODE.values(), ids=IN_CODE.keys())
def test_a_link_in_code_or_behind_an_escape_does_not_make_a_snippet_consulted(answer):
    p = sources_payload(snippet_turn(answer))
    assert p.citations == () and p.sets.cited == () and p.sets.consulted == ()


@pytest.mark.parametrize("answer", IN_CODE.values(), ids=IN_CODE.keys())
def test_the_same_link_in_prose_next_to_it_still_counts(answer):
    full = answer + f"\n\nSee [B]({BASE}b)."
    p = sources_payload(snippet_turn(full))
    assert p.sets.cited == ("b",) and p.sets.consulted == ("b",)
    [c] = p.citations
    assert full[c.start:c.end] == f"[B]({BASE}b)" and c.target == BASE + "b"


MARKERS_IN_CODE = {
    "backtick fence": "Use:\n\n```\nsee [1]\n```\n",
    "tilde fence": "Use:\n\n~~~\nsee [1]\n~~~\n",
    "indented code block": "Use:\n\n    see [1]\n",
    "code span": "Write `[1]` or ``[1]``.",
    "escaped": "Write \\[1] literally.",
    "inline HTML": 'A <span title="[1]">tag</span>.',
}


@pytest.mark.parametrize("answer", MARKERS_IN_CODE.values(), ids=MARKERS_IN_CODE.keys())
def test_excerpt_markers_in_code_are_not_citations(answer):
    excerpts = (Excerpt(n=1, doc_id="a", chunk_index=0, score=1.0, text="text a", title="A", file_name="a.md"),)
    p = sources_payload(snippet_turn(answer, "excerpts", excerpts))
    assert p.citations == () and p.sets.consulted == ()
    p = sources_payload(snippet_turn(answer + "\n\nDone [1].", "excerpts", excerpts))
    assert [c.n for c in p.citations] == [1] and p.sets.consulted == ("a",)


def test_reference_links_and_links_across_lines_are_citations():
    answer = f"See [the guide][g] and [two\nlines]({BASE}b).\n\n[g]: {BASE}a\n"
    assert [c.target for c in extract_citations(answer, "agent")] == [BASE + "a", BASE + "b"]


def test_offsets_hold_inside_block_quotes_lists_and_crlf_answers():
    answer = f"> quote\r\n> - item [A]({BASE}a) and <{BASE}b>\r\n\r\n1. [C](c)\n"
    cits = extract_citations(answer, "agent")
    assert [answer[c.start:c.end] for c in cits] == [f"[A]({BASE}a)", f"<{BASE}b>", "[C](c)"]


# --- properties against the parser's own link tokens ---------------------------------------------

STD = MarkdownIt("commonmark")
STD.validateLink = lambda url: True  # the workbench rejects javascript: targets itself, as citations


def parser_links(doc: str) -> list[str]:
    """The hrefs of the parser's links, in order: top-level link tokens of each inline block (a link in an
    image's description is part of the image), autolinks only when they are web addresses."""
    out = []
    for block in STD.parse(doc):
        for t in block.children or ():
            if t.type == "link_open":
                href = t.attrs["href"]
                if t.markup == "autolink" and not href.lower().startswith(("http://", "https://")):
                    continue
                if href and not href.startswith("#"):
                    out.append(href)
    return out


IDS = st.text(alphabet="abz019-_.", min_size=1, max_size=6)
WORDS = st.text(alphabet="abc xyz,.!:;", min_size=1, max_size=12)


# Inline pieces: {w} is a few words, {t} a target, {n} a digit, {b} a stray bracket or backslash.
PIECES = {
    "words": "{w}", "link": "[{w}]({t})", "url link": "[{w}](" + BASE + "{t})", "angle link": "[t](<" + BASE + "{t}>)",
    "titled": '[t]({t} "a title")', "autolink": "<" + BASE + "{t}>", "mail": "<mailto:{t}@x.org>",
    "image": "![{w}]({t})", "escaped": "\\[t]({t})", "marker": "[{n}]", "anchor": "[jump](#steps)", "bracket": "{b}",
    "html": '<span title="[t]({t})">x</span>',
}


@st.composite
def inline(draw, depth: int = 0):
    kind = draw(st.sampled_from([*PIECES, "emphasis", "code"]))
    if kind in PIECES:
        return PIECES[kind].format(w=draw(WORDS), t=draw(IDS), n=draw(st.integers(0, 9)),
                                   b=draw(st.sampled_from(["[", "]", "(", ")", "](", "[t]", "\\"])))
    inner = draw(inline(depth + 1)) if depth < 2 else draw(WORDS)
    mark = draw(st.sampled_from(["*", "_", "**"])) if kind == "emphasis" else "`" * draw(st.integers(1, 4))
    return f"{mark}{inner}{mark}"


@st.composite
def documents(draw):
    lines = []
    for _ in range(draw(st.integers(1, 6))):
        text = " ".join(draw(st.lists(inline(), min_size=1, max_size=5)))
        block = draw(st.sampled_from(["paragraph", "fence", "indented", "quote", "list", "heading", "blank"]))
        if block == "fence":
            fence = draw(st.sampled_from(["```", "~~~", "````", "~~~~~"]))
            inner = draw(st.sampled_from(["", "```\n", "~~~\n"]))  # a shorter fence inside does not close it
            lines += [fence + draw(st.sampled_from(["", "md"])), inner + text, fence]
        elif block == "indented":
            lines += ["", "    " + text, ""]
        elif block == "quote":
            lines.append("> " + text)
        elif block == "list":
            lines.append(draw(st.sampled_from(["- ", "1. ", "  * "])) + text)
        elif block == "heading":
            lines.append("## " + text)
        elif block == "blank":
            lines.append("")
        else:
            lines.append(text)
    return draw(st.sampled_from(["\n", "\r\n"])).join(lines)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents())
@example("> [\n> : : : : \\[t](0)")  # a link whose text crosses a quoted line (found by a full-suite run)
def test_citations_are_exactly_the_parsers_links(doc):
    cits = extract_citations(doc, "agent")
    assert [STD.normalizeLink(c.target) for c in cits] == parser_links(doc)
    for c in cits:  # each citation's span, parsed alone, is that link and the ones nested in its text
        # (an autolink inside a link's text is a link of its own, a token inside the outer one: CommonMark)
        inner = [STD.normalizeLink(o.target) for o in cits if o is not c and c.start <= o.start and o.end <= c.end]
        # inside a block quote, the span's later lines carry its `>` markers: parsed with the markers its first line
        # starts with, or the span's second line would open a quote of its own
        span = _quoted_markers(doc, c.start) + doc[c.start:c.end]
        assert parser_links(span) == [STD.normalizeLink(c.target), *inner], span


def _quoted_markers(doc: str, at: int) -> str:
    """The block-quote markers (`> `, nested ones too) the line holding `doc[at]` starts with; empty outside a quote."""
    line = doc[doc.rfind("\n", 0, at) + 1:at]
    return re.match(r"(?: {0,3}> ?)*", line).group(0)


def test_an_autolink_inside_a_links_text_is_a_citation_of_its_own():
    doc = "[ <https://help.example.com/articles/0> \\[t](0)"
    cits = extract_citations(doc, "agent")
    assert [c.target for c in cits] == ["0", "https://help.example.com/articles/0"] == parser_links(doc)
    assert cits[0].start <= cits[1].start and cits[1].end <= cits[0].end


def parser_markers(doc: str) -> list[int]:
    """The `[n]` in the parser's plain text (not code, links, escapes, HTML), text tokens left unjoined."""
    import re

    md = MarkdownIt("commonmark")
    md.validateLink = lambda url: True
    md.core.ruler.disable("text_join")
    out = []
    for block in md.parse(doc):
        depth = 0
        for t in block.children or ():
            depth += t.type == "link_open"
            depth -= t.type == "link_close"
            if t.type == "text" and not depth:
                out += [int(m.group(1)) for m in re.finditer(r"\[(\d)\](?!\()", t.content)]
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents())
def test_excerpt_markers_are_exactly_the_markers_in_the_parsers_text(doc):
    cits = [c for c in extract_citations(doc, "excerpts") if c.n is not None]
    assert [c.n for c in cits] == parser_markers(doc)
