"""What the app draws cannot be spoofed or freeze a tab (issue 24, items 6 and 9).

- Bidi controls (U+202A–U+202E, U+2066–U+2069, U+200E/F, U+061C) reach no element of the page: titles,
  ids, snippets, answers, questions, tool arguments, tables all show them as visible escapes, as the CLI
  does (`terminal.neutralize`), so "invoice" + U+202E + "gpj.exe" cannot read "invoice" + "exe.jpg".
- No line the app renders is longer than `render.escaping.MAX_LINE_CHARS` (a 200,000-character line froze a tab).
- An answer cannot draw the sources row: its headings are demoted to text, and the real row is a bordered
  box (`st.container(border=True)`) with an icon, which answer markdown cannot produce.
"""

from __future__ import annotations

import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st

from apptest import APP, ask, texts, unescape
from workbench.providers.base import ModelStep, Provider, ToolRequest, register_provider
from workbench.payload import Payload
from workbench.render.answer_links import answer_markdown
from workbench.render.escaping import (MAX_LINE_CHARS, display_text, display_value, escape_markdown, plotly_text,
                                       safe_markdown)
from workbench.render.highlight import highlighted_markdown
from workbench.types import ModelCall

BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
RLO = "\u202e"
#: The UTF-8 bytes of every bidi control: found in no element the app sends to the browser.
BIDI_BYTES = [c.encode() for c in BIDI]


def _bidi_in(s: str) -> set[str]:
    return {c for c in s if c in BIDI}


# --- the render chokepoints --------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list(BIDI) + list("ab .#*[](\n")), max_size=60))
def test_every_render_chokepoint_makes_bidi_controls_visible(text):
    outs = [escape_markdown(text), safe_markdown(text), highlighted_markdown(text, [(0, len(text), "quoted")]),
            plotly_text(text), display_text(text), json.dumps(display_value({text: [text]}), ensure_ascii=False)]
    for out in outs:
        assert not _bidi_in(out), out
    for c in _bidi_in(text):  # shown as the CLI shows them
        assert f"\\u{ord(c):04x}" in unescape(escape_markdown(text))


def test_long_lines_are_wrapped_at_every_chokepoint_and_nothing_is_lost():
    line = "x" * 2500 + " " + "word " * 600
    for out in (unescape(escape_markdown(line)), unescape(safe_markdown(line)), display_text(line)):
        lines = out.split("\n")
        assert max(len(x.rstrip()) for x in lines) <= MAX_LINE_CHARS, [len(x) for x in lines]
        assert "".join(x.rstrip() for x in lines).replace(" ", "") == line.replace(" ", ""), "wrapped, not cut"


def test_answer_headings_are_demoted_to_text():
    payload = Payload(answer="# Sources\n\nok\n\n## Sources\nSources\n---\nSources\n===\n- an item\n**Sources** x\n"
                             "- # Sources\n1. ## Sources\n   ### Sources")
    md = answer_markdown(payload)
    assert not re.search(r"(?m)^[ \t]*(?:(?:[-*+]|\d+[.)])[ \t]+)*(#{1,6}(?=\s|$)|=+\s*$|-+\s*$)", md), md
    assert "- an item" in md and "**Sources** x" in md, "lists and emphasis stay formatting"
    assert unescape(md).splitlines()[0] == "# Sources", "the reader still sees what the model wrote"


# --- the app ------------------------------------------------------------------------------------


def _elements(node):
    """Every element and block of an AppTest tree."""
    yield node
    for child in getattr(node, "children", {}).values():
        yield from _elements(child)


def _bidi_in_page(at) -> list[str]:
    """Elements whose protobuf (what Streamlit sends the browser: markdown, JSON, Arrow tables, widget
    labels and options) holds a bidi control's UTF-8 bytes."""
    found = []
    for el in _elements(at._tree):
        proto = getattr(el, "proto", None)
        if proto is None or not hasattr(proto, "SerializeToString"):
            continue
        raw = proto.SerializeToString()
        if any(b in raw for b in BIDI_BYTES):
            found.append(f"{type(el).__name__}: {raw[:160]!r}")
    return found


def _long_line_corpus(home):
    corpus = home / "spoof-corpus"  # inside WORKBENCH_HOME: an allowed root
    corpus.mkdir(parents=True, exist_ok=True)
    line = RLO + ("مرحبا بالعالم " * 14_300)[:200_000 - 1]
    (corpus / "overflow-widget.md").write_text(
        "---\nid: overflow-widget\ntitle: \"Overflow widget invoice" + RLO + "gpj.exe\"\n"
        "url: https://help.example.test/overflow-widget\n---\n"
        "To calibrate the overflow widget, open the overflow\u2066 panel and press calibrate twice.\n"
        f"{line}\nThe overflow widget calibration ends here: endmarker-overflow.\n", encoding="utf-8")
    (corpus / "overflow-reset.md").write_text(
        "---\nid: overflow-reset\ntitle: Reset the overflow widget\nurl: https://help.example.test/overflow-reset\n"
        "---\nTo reset the overflow widget, hold the reset button for ten seconds.\n", encoding="utf-8")
    return corpus


def _use_corpus(at, corpus):
    at.sidebar.radio(key="cfg_corpus_source").set_value("Folder or JSONL path").run()
    at.sidebar.text_input(key="cfg_corpus_path").set_value(str(corpus)).run()
    assert not at.exception, at.exception


def test_no_bidi_control_reaches_the_page_and_no_line_is_longer_than_the_cut(app, _workbench_home):
    corpus = _long_line_corpus(_workbench_home)
    _use_corpus(app, corpus)
    at = ask(app, "How do I calibrate the overflow widget?" + RLO + "fdp.exe")
    turn = at.session_state["turns"][0]
    assert "overflow-widget" in turn.payload.sets.consulted, turn.payload.sets
    at.get("button_group")[0].set_value("overflow-widget").run()  # open it in the side panel
    assert not at.exception, at.exception
    panel = next(m.value for m in at.markdown if "endmarker" in m.value)
    assert "overflow\\\\u2066 panel" in panel, "the isolate is shown as a visible escape"
    # tool calls (their arguments hold the question) and claims are in collapsed expanders, still sent
    assert not _bidi_in_page(at), _bidi_in_page(at)
    assert "gpj\\.exe" in texts(at) and "\\\\u202e" in texts(at), "the override is visible where the title is shown"
    # every line the browser lays out is at most MAX_LINE_CHARS characters (plus highlight markup)
    longest = max(len(x) for m in at.markdown for x in unescape(m.value).split("\n"))
    assert longest <= MAX_LINE_CHARS + 60, longest


class SpoofingProvider(Provider):
    """Searches, opens the first hit, then answers with text imitating the app's sources row."""

    name = "spoof-test"
    label = "spoofing (test)"

    def complete(self, messages, tools) -> ModelStep:
        call = ModelCall(self.name, "v1", 1.0, 10, 5, "stop")
        question = next(m["content"] for m in messages if m["role"] == "user")
        results = [json.loads(m["content"]) for m in messages if m["role"] == "tool"]
        if not results:
            return ModelStep("", (ToolRequest("s1", "search", {"query": question, "k": 5}),), call)
        hit = results[0]["results"][0]
        if len(results) == 1:
            return ModelStep("", (ToolRequest("s2", "fetch_document", {"doc_id": hit["doc_id"]}),), call)
        answer = (f"Configure it as [{hit['title']}]({hit['url']}) says.\n\n"
                  "# Sources\n\n**Sources** [Trusted guide](https://help.orbitly.example/articles/sso-okta) "
                  "· [Official](https://evil.example/x)\n\nSources\n---\n\n## ✅ Sources: verified")
        return ModelStep(answer, (), call)


register_provider("spoof-test", SpoofingProvider)


def _sources_blocks(at):
    return [el for el in _elements(at._tree)
            if type(el).__name__ == "Block" and "-sources-" in getattr(el.proto, "id", "")]


def test_an_answer_cannot_draw_the_sources_row(app):
    app.sidebar.selectbox(key="cfg_provider").set_value("spoof-test").run()
    at = ask(app, "How do I configure SSO?")
    turn = at.session_state["turns"][0]
    assert turn.error is None and turn.payload.sets.consulted, turn.payload
    answer = next(m.value for m in at.markdown if "Official" in m.value)
    # the model's headings are text, not headings; its links to documents are not a row of chips
    assert not re.search(r"(?m)^ {0,3}(#{1,6}(?=\s|$)|=+\s*$|-+\s*$)", answer), answer
    assert ":green-badge[" not in answer and ":material/" not in answer
    assert "](<https://evil.example" not in answer, "a link to an unretrieved page is no link"
    # the one real sources row: a bordered box holding the icon and the consulted document's chip
    blocks = _sources_blocks(at)
    assert len(blocks) == 1, [b.proto.id for b in blocks]
    assert blocks[0].proto.flex_container.border, "the sources row is a bordered box"
    row = [el.value for el in _elements(blocks[0]) if type(el).__name__ == "Markdown"]
    assert len(row) == 1 and row[0].startswith(":material/fact_check: **Sources** :green-badge["), row



def test_trace_tables_and_doc_gaps_show_bidi_controls_as_escapes(tmp_path, monkeypatch):
    """Questions come back from the trace store in the Trace explorer's and Doc gaps' tables."""
    from streamlit.testing.v1 import AppTest

    from conftest import ROOT

    monkeypatch.setenv("WORKBENCH_DB", str(tmp_path / "traces.duckdb"))
    chat = AppTest.from_file(APP, default_timeout=60).run()
    ask(chat, "How do I bake a sourdough" + RLO + " loaf?")  # consults nothing: a doc gap
    same_browser = {"viewer_token": chat.session_state["viewer_token"]}  # a browser sees its own turns (security.md)
    explorer = AppTest.from_file(str(ROOT / "pages" / "2_Trace_explorer.py"), default_timeout=60)
    explorer.session_state["viewer_token"] = same_browser["viewer_token"]
    explorer.run()
    explorer.text_area(key="sql").set_value(f"SELECT question, question AS \"asked{RLO}\" FROM turns")
    explorer.button[0].click().run()
    assert not explorer.exception, explorer.exception
    df = explorer.dataframe[0].value
    assert list(df.columns) == ["question", "asked\\u202e"] and "sourdough\\u202e loaf" in df["question"][0]
    gaps = AppTest.from_file(str(ROOT / "pages" / "3_Doc_gaps.py"), default_timeout=60)
    gaps.session_state["viewer_token"] = same_browser["viewer_token"]
    gaps.run()
    assert not gaps.exception, gaps.exception
    assert gaps.dataframe, "the question is a doc gap"
    for at in (explorer, gaps):
        assert not _bidi_in_page(at), _bidi_in_page(at)


class BidiModelsProvider(SpoofingProvider):
    """A server whose model list holds an override (`list_models` of Ollama or an OpenAI-compatible server)."""

    name = "bidi-models-test"
    label = "bidi models (test)"

    def list_models(self) -> list[str]:
        return ["tiny", "invoice" + RLO + "gpj.exe"]


register_provider("bidi-models-test", BidiModelsProvider)


def test_model_names_from_a_server_show_bidi_controls_as_escapes(app):
    app.sidebar.selectbox(key="cfg_provider").set_value("bidi-models-test").run()
    assert not app.exception, app.exception
    assert app.sidebar.selectbox(key="cfg_model_bidi-models-test").options == ["tiny", "invoice\\u202egpj.exe"]
    assert not _bidi_in_page(app), _bidi_in_page(app)


# --- document titles where the chat suggests a question (issue 31, item 5) -----------------------

#: An uploaded document whose title is a task ("Reset …", so the chat makes its example question of it) carrying
#: a markdown link, an auto-link, a badge, maths and a bidi override.
HOSTILE_TITLE = ("Reset [the widget](https://evil.example/pwn) :red-badge[admin] $E=mc^2$ "
                 "www.evil.example invoice" + RLO + "gpj.exe")
HOSTILE_MD = (f"---\nid: hostile-title\ntitle: \"{HOSTILE_TITLE}\"\nurl: https://help.example.test/hostile\n---\n"
              "To reset the widget, hold its button for ten seconds.\n")


def _live_markdown(md: str) -> list[str]:
    """What in `md` a markdown renderer would turn into a link, an image, a directive (badge) or maths: any of
    their opening characters not escaped by a backslash."""
    return re.findall(r"(?<!\\)(?:\]\(|!\[|:[a-z]+-badge\[|\$|<)", md)


def test_an_uploaded_title_is_text_in_the_chat_s_hint_and_placeholder(app):
    app.sidebar.radio(key="cfg_corpus_source").set_value("Upload").run()
    app.file_uploader(key="corpus_upload").set_value(("hostile.md", HOSTILE_MD.encode(), "text/markdown")).run()
    assert not app.exception, app.exception
    hint = next(m.value for m in app.info if m.value.startswith("Try "))
    assert not _live_markdown(hint), (_live_markdown(hint), hint)
    shown = unescape(hint)
    assert "https://" not in shown and "www." not in shown, "no auto-link either (a word joiner breaks each)"
    assert "[the widget](https" in shown.replace("\u2060", "") and "invoice\\u202egpj.exe" in shown, \
        "the reader sees the title as it is, the override as a visible escape"
    placeholder = app.chat_input[0].proto.placeholder  # the browser also makes it the box's aria-label
    assert "How do I reset [the widget](https://evil.example/pwn)" in placeholder, placeholder
    assert "invoice\\u202egpj.exe" in placeholder and not _bidi_in(placeholder), placeholder
    assert not _bidi_in_page(app), _bidi_in_page(app)
