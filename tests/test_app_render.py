"""Pure helpers the app renders with (workbench/render/): escaping, citation links, highlights."""

from __future__ import annotations

import re
import string

from hypothesis import given, settings
from hypothesis import strategies as st

from apptest import unescape
from workbench.provenance import sources_payload
from workbench.render.answer_links import answer_markdown, citation_entries
from workbench.render.escaping import escape_markdown, safe_markdown
from workbench.render.highlight import evidence_passages, highlight_spans, highlighted_markdown
from workbench.terminal import neutralize
from workbench.types import Excerpt, ResultItem, ToolCall, TurnRecord

PUNCT = set(string.punctuation)


def _unescaped(md: str, chars: set[str]) -> list[str]:
    """Characters of `chars` in `md` that are not preceded by an escaping backslash."""
    bad, i = [], 0
    while i < len(md):
        if md[i] == "\\":
            i += 2
            continue
        if md[i] in chars:
            bad.append(md[i])
        i += 1
    return bad


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_escape_markdown_leaves_no_markdown_syntax(text):
    assert _unescaped(escape_markdown(text), PUNCT) == []


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_safe_markdown_cannot_form_links_images_or_html(text):
    md = safe_markdown(text)
    assert _unescaped(_CODE.sub(r"\1", md), set("[]()<>!`:$&@")) == []  # outside code spans: all escaped
    assert not re.search(r"<(a|img|script)\b", _html(md)), md  # inside code spans: literal


#: An inline code span of safe_markdown's output: an unescaped backtick pair on one line (issue 41 item 12).
_CODE = re.compile(r"(?<!\\)((?:\\\\)*)`[^`\n]*`")  # after an even run of backslashes (escaped ones)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=10), st.sampled_from(["`", "`[x](http://e.example)`", "`<img src=x>`",
                                                                 "`:red[x]`", "`$x$`", "**", "\\"])), max_size=8))
def test_inline_code_in_an_answer_is_code_and_forms_nothing(parts):
    md = safe_markdown("".join(parts))
    html = _html(md)
    assert not re.search(r"<(a|img|script)\b", html), md
    assert _unescaped(_CODE.sub(r"\1", md), set("[]()<>!`:$&@")) == []


def test_an_answers_inline_code_is_drawn_as_code_not_literal_backticks():
    md = safe_markdown("Set `SAML 2.0` under **Settings**; `[x](http://e.example)` stays text.")
    assert "\\`" not in md
    html = _html(md)
    assert "<code>SAML 2.0</code>" in html and "<code>[x](http://e.example)</code>" in html and "<a " not in html


def test_safe_markdown_keeps_emphasis_and_lists_but_breaks_www_autolinks():
    md = safe_markdown("**bold**\n- item\nsee www.evil.example")
    assert md.startswith("**bold**\n- item")
    assert "www\u2060\\.evil" in md, "a word joiner breaks the auto-link; the text reads the same"


def test_escape_markdown_keeps_lines_and_kills_indented_code():
    assert escape_markdown("a\n    b\n\nc") == "a  \nb  \n  \nc"


def _record(answer, calls=(), excerpts=(), mode="agent"):
    return TurnRecord(question="q", answer=answer, mode=mode, tool_calls=tuple(calls), excerpts=tuple(excerpts),
                      turn_id="t1")


def test_valid_citation_becomes_a_safe_link_with_a_badge_and_unsafe_urls_lose_their_link():
    calls = [ToolCall("search", "snippet", {"query": "q"}, (
        ResultItem("good", "Good doc", "https://help.example/good", snippet="alpha"),
        ResultItem("evil", "Evil [doc]", "javascript:alert(1)", snippet="beta"),
    ))]
    answer = "See [Good](https://help.example/good) and [Evil](javascript:alert(1)) and [x](evil)."
    payload = sources_payload(_record(answer, calls))
    md = answer_markdown(payload)
    assert "[Good](<https://help.example/good>) :blue-badge[1]" in md
    assert "javascript" not in md.replace("javascript\\:", "")  # only as escaped text, never a target
    assert re.findall(r"\]\(<([^>]*)>\)", md) == ["https://help.example/good"]
    entries = citation_entries(payload)
    assert [(e["marker"], e["doc_id"], e["url"]) for e in entries] == [("1", "good", "https://help.example/good"),
                                                                        ("2", "evil", None)]


def test_rejected_citations_are_plain_text_with_warning_and_reason():
    calls = [ToolCall("fetch_document", "full", {"doc_id": "sso-setup"},
                      (ResultItem("sso-setup", "SSO", "https://h.example/sso-setup"),))]
    payload = sources_payload(_record("Read [SSO](https://h.example/sso-setuq).", calls))
    md = answer_markdown(payload)
    assert "](" not in md
    assert ":orange-badge[⚠ rejected citation\\: not retrieved \\(nearest retrieved\\: sso\\-setup\\, " \
           "edit distance 1\\)]" in md
    assert citation_entries(payload) == []


def test_excerpt_markers_badge_valid_and_flag_out_of_range():
    ex = [Excerpt(1, "a", 0, text="alpha beta gamma", title="A"), Excerpt(2, "b", 0, text="delta", title="B")]
    payload = sources_payload(_record("Alpha [1]. Delta [2, 7].", excerpts=ex, mode="excerpts"))
    md = answer_markdown(payload)
    assert md.startswith("Alpha :blue-badge[1]. Delta :blue-badge[2] :orange-badge[⚠ \\[7\\] rejected")
    assert "out of range" in md
    assert [e["key"] for e in citation_entries(payload)] == ["[1]", "[2]"]


def test_highlight_finds_reflowed_passages_and_quoted_wins():
    text = "# Title\n\nFirst sentence is here now. Second   sentence\nwraps a line here.\nTail text."
    passages = [("snippet", "First sentence is here now. Second sentence wraps a line here."),
                ("quoted", "Second sentence wraps a line here.")]
    spans = highlight_spans(text, passages)
    kinds = {text[s:e]: k for s, e, k in spans}
    assert kinds["Second   sentence\nwraps a line here."] == "quoted"
    assert kinds["First sentence is here now."] == "snippet"
    md = highlighted_markdown(text, spans)
    assert ":orange-background[Second   sentence]  \n:orange-background[wraps a line here\\.]" in md
    assert _unescaped(re.sub(r":(orange|blue)-background\[|\]", "", md), PUNCT) == []


def test_evidence_passages_of_a_real_turn_highlight_the_opened_document(demo_session):
    answer = demo_session.ask("How do I configure SSO?")
    doc_id = answer.payload.sets.consulted[0]
    doc = demo_session.corpus.get(doc_id)
    spans = highlight_spans(doc.text, evidence_passages(answer.record, doc_id))
    assert any(k == "quoted" for _, _, k in spans), "the passage the answer quotes is highlighted"
    assert any(k == "snippet" for _, _, k in spans), "the search snippet the model saw is highlighted"


# GFM's auto-link literals, as remark-gfm finds them in rendered text (JavaScript's \w is ASCII).
_GFM_AUTOLINK = re.compile(r"(?i)(https?://|www\.)[-.A-Za-z0-9_]|[-.+A-Za-z0-9_]+@[-A-Za-z0-9_]+\.[-A-Za-z0-9_]")


_URLISH = st.sampled_from(["http://127.0.0.1:9/x", "HTTPS://evil.example/a", "www.evil.example", "WWW.Evil.Example",
                           "ops@evil.example", "mailto:ops@evil.example", "http\\://x.y/z", "http\\:\\/\\/www\\.x\\.y",
                           "ftp://x.y", "http://www.x.y@z.example"])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.text(max_size=12), _URLISH), max_size=6))
def test_escaped_and_safe_markdown_never_auto_link(parts):
    """Before the fix `http\\:\\/\\/…`, `www.…` and e-mail addresses became links in the browser."""
    text = " ".join(parts).replace("\n", " ")
    for md in (escape_markdown(text), safe_markdown(text)):
        assert not _GFM_AUTOLINK.search(unescape(_CODE.sub(r"\1", md))), md  # GFM links nothing inside code
    if text.strip():  # the reader sees the same characters (the word joiner is invisible), controls as escapes
        assert unescape(escape_markdown(text)).replace("\u2060", "") == neutralize(text.lstrip(" \t"))


# --- a document's own markdown in the side panel (issue 25, item 1) -------------------------------


def _html(md: str) -> str:
    """What a CommonMark renderer with raw HTML allowed makes of `md` (Streamlit's renderer allows less)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"]).render(md)


HOSTILE_MD = """# Title <img src=x onerror=alert(1)>

Text with **bold**, *em*, `code`, [a link](http://evil.example/x) and ![img](http://evil.example/i.png).
<script>alert(1)</script> <a href="javascript:alert(2)">a</a> :red[directive] $x^2$ www.evil.example

[ref]: http://evil.example/ref
See [the ref][ref] and <http://evil.example/angle> and mail@evil.example.

<div onclick="alert(3)">
block html
</div>

| a | b |
|---|---|
| `x\\|y` | **z** |

```sh
echo ```` not closed
```
"""


def test_document_markdown_keeps_formatting_and_nothing_else():
    from workbench.render.document import document_markdown

    html = _html(document_markdown(HOSTILE_MD))
    for tag in ("<a ", "<img", "<script", "<div", "<style"):
        assert tag not in html, f"{tag} formed: {html}"
    assert "<strong>bold</strong>" in html and "<em>em</em>" in html and "<code>code</code>" in html
    assert "<h4>" in html, "the document's # heading sits below the panel's own title"
    assert "<table>" in html and "<strong>z</strong>" in html and "<code>x|y</code>" in html
    assert "a link" in html and "evil.example/x" not in html, "a link keeps its text, not its target"
    assert "[image: img]" in html and "i.png" not in html, "an image is never fetched"
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "&lt;div onclick" in html, "HTML is shown as text"
    assert "www\u2060.evil" in html and "mail\u2060@evil" in html, "auto-links are broken"
    assert "echo ```` not closed" in html, "code stays literal inside a longer fence"


def test_document_markdown_highlights_spans_inside_formatting():
    from workbench.render.document import document_markdown

    text = "Orbitly supports SSO with any provider that speaks **SAML 2.0**. Then more.\n"
    spans = highlight_spans(text, [("quoted", "Orbitly supports SSO with any provider that speaks **SAML 2.0**.")])
    md = document_markdown(text, spans)
    # one box over the passage, the bold inside it (issue 41 item 12: no boxes split around "SAML 2.0")
    assert ":orange-background[Orbitly supports SSO with any provider that speaks **SAML 2\\.0**\\.]" in md
    assert "Then more" in md and ":orange-background[ Then" not in md


def test_a_highlight_over_bold_text_is_one_box_not_three():
    """Issue 41 item 12: a quoted passage with bold words in it was drawn as boxes split around them ("SAML 2.0 .")."""
    from workbench.render.document import document_markdown

    text = "Go to Settings. Pick **SAML 2.0**. Then save."
    md = document_markdown(text, [(0, len(text), "quoted")])
    assert md.count("-background[") == 1, md
    assert md == ":orange-background[Go to Settings\\. Pick **SAML 2\\.0**\\. Then save\\.]"
    part = document_markdown(text, [(16, len(text), "quoted")])  # from "Pick": the bold inside the one box
    assert part.count("-background[") == 1 and part.startswith("Go to Settings\\. :orange-background[Pick **SAML")
    two = document_markdown("a **b** c", [(0, 2, "quoted"), (2, 9, "excerpt")])  # two colours stay two boxes
    assert two.count("-background[") == 2


def test_a_highlight_never_ends_or_starts_mid_word():
    """Issue 41 item 12: a search snippet cut mid-word ("Verify your compan") drew its box to "compan" and the rest
    of the word outside it, read as "compan y's". A passage's box takes whole words."""
    text = "Before you start. Verify your company's email domain under Settings."
    spans = highlight_spans(text, [("snippet", "Verify your compan")])
    assert [text[s:e] for s, e, _ in spans] == ["Verify your company's"]
    spans = highlight_spans(text, [("snippet", "rify your company's email")])
    assert [text[s:e] for s, e, _ in spans] == ["Verify your company's email"]
    spans = highlight_spans(text, [("quoted", "Verify your company's email domain under Settings.")])
    assert [text[s:e] for s, e, _ in spans] == ["Verify your company's email domain under Settings."]
