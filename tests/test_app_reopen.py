"""A conversation reopened in the app (`?conversation=ID`, issue 33 item 2) under AppTest, against a real trace
database: its verification, claims and turn time as they were recorded, verification offered again where it can
run, and the corpus it was asked with rather than the sidebar's."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from streamlit.testing.v1 import AppTest

import scripted
from apptest import APP, ask, texts, unescape
from workbench.providers.base import _PROVIDERS, register_provider

QUESTION = "How do I configure SSO?"


def click(at: AppTest, label: str) -> AppTest:
    next(b for b in at.button if b.label == label).click().run()
    assert not at.exception, at.exception
    return at


def reload(browser: AppTest, corpus: Path | None = None) -> AppTest:
    """A reload of `browser`: a fresh session of the same browser (without sign-in a browser is known by its token,
    `identity.browser_token`) opening its conversation's `?conversation=`; with `corpus`, the sidebar has that
    folder chosen before the address is followed."""
    cid = browser.session_state["conversation_id"]
    at = AppTest.from_file(APP, default_timeout=60)
    at.session_state["viewer_token"] = browser.session_state["viewer_token"]
    if corpus is not None:
        at.run()
        at.sidebar.radio(key="cfg_corpus_source").set_value("Folder or JSONL path").run()
        at.sidebar.text_input(key="cfg_corpus_path").input(str(corpus)).run()
    at.query_params["conversation"] = cid
    at.run()
    assert not at.exception, at.exception
    return at


def sources_rows(at: AppTest) -> list[str]:
    return [unescape(m.value) for m in at.markdown if "**Sources**" in m.value]


def captions(at: AppTest) -> list[str]:
    return [unescape(c.value) for c in at.caption if c.value.startswith("⚙")]


def labels(at: AppTest) -> list[str]:
    return [b.label for b in at.button]


def widgets_folder(tmp_path: Path) -> Path:
    corpus = tmp_path / "widgets"
    corpus.mkdir()
    (corpus / "a.md").write_text("---\nid: a\ntitle: Calibrate the widget\nurl: https://help.example.com/a\n---\n"
                                 "Press calibrate twice to calibrate the widget.\n")
    return corpus


def test_a_verified_turn_shows_its_verdicts_and_claims_after_a_reload(app):
    at = click(ask(app, QUESTION), "Verify sources")
    turn = at.session_state["turns"][0]
    verdicts = turn.payload.verification.verdicts
    assert "load_bearing" in verdicts.values()
    chips = sources_rows(at)
    claims = [e.label for e in at.expander if e.label.startswith("Claims")]
    assert claims, "the fresh turn has its Claims expander"
    again = reload(at)
    (reopened,) = again.session_state["turns"]
    assert reopened.payload.verification is not None, "the stored verification is shown"
    assert reopened.payload.verification.verdicts == verdicts
    assert reopened.payload.verification.control_stable == turn.payload.verification.control_stable
    assert sources_rows(again) == chips, "the chips carry the stored verdicts"
    md = unescape(texts(again))
    assert "- :green-badge[load-bearing] the answer changed without it" in md, "the verdicts explained"
    assert [e.label for e in again.expander if e.label.startswith("Claims")] == claims
    assert [c.text for c in reopened.faithfulness.claims] == [c.text for c in turn.faithfulness.claims]
    assert [c.verdict for c in reopened.faithfulness.claims] == [c.verdict for c in turn.faithfulness.claims]
    assert "citation recall and precision are not stored" in "\n".join(c.value for c in again.caption)
    assert "Verify sources" not in labels(again), "verified already, as before the reload"


def test_a_reopened_turn_can_be_verified_and_its_verification_is_stored(app, tmp_path):
    at = ask(app, QUESTION)
    assert "Verify sources" in labels(at)
    again = reload(at)
    assert "Verify sources" in labels(again), "its provider options are stored: it can be re-run"
    again = click(again, "Verify sources")
    (turn,) = again.session_state["turns"]
    assert turn.payload.verification is not None and "load_bearing" in turn.payload.verification.verdicts.values()
    con = duckdb.connect(str(tmp_path / "traces.duckdb"), read_only=True)
    try:
        stored = dict(con.execute("SELECT doc_id, verdict FROM source_verdicts WHERE turn_id = ? AND verdict IS NOT "
                                  "NULL", [turn.turn_id]).fetchall())
    finally:
        con.close()
    assert stored == turn.payload.verification.verdicts
    assert reload(at).session_state["turns"][0].payload.verification is not None


def test_the_turn_time_shown_is_the_recorded_one_before_and_after_a_reload(app):
    at = ask(app, QUESTION)
    (turn,) = at.session_state["turns"]
    shown = captions(at)
    assert len(shown) == 1 and shown[0].endswith(f" · {turn.answer.record.latency_ms:.0f} ms"), shown
    again = reload(at)
    assert captions(again) == shown, "the same time after the reload"


def test_a_conversation_reopened_beside_another_corpus_is_checked_against_its_own(app, tmp_path, monkeypatch):
    at = ask(app, QUESTION)
    (turn,) = at.session_state["turns"]
    assert turn.payload.sets.cited and not turn.payload.rejected_citations
    monkeypatch.setenv("WORKBENCH_ALLOWED_ROOTS", str(tmp_path))
    again = reload(at, corpus=widgets_folder(tmp_path))
    (reopened,) = again.session_state["turns"]
    assert reopened.payload.rejected_citations == (), "its citations are valid in the corpus it was asked with"
    assert reopened.payload.sets == turn.payload.sets
    assert reopened.session.corpus.content_hash == turn.answer.record.config["corpus_hash"]
    assert reopened.config.corpus == turn.config.corpus and reopened.config.corpus_label == "demo"
    warning = unescape("\n".join(w.value for w in again.warning))
    assert "not the sidebar's corpus widgets" in warning
    assert "Verify sources" in labels(again), "its own corpus is loaded: it can be verified"
    again = ask(again, "How do I calibrate the widget?")
    new = again.session_state["turns"]
    assert len(new) == 1 and new[0].answer.record.history == (), "the widgets question starts a new conversation"


def test_a_conversation_whose_corpus_is_gone_says_so_and_keeps_its_citations(app, tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_ALLOWED_ROOTS", str(tmp_path))
    corpus = widgets_folder(tmp_path)
    app.sidebar.radio(key="cfg_corpus_source").set_value("Folder or JSONL path").run()
    app.sidebar.text_input(key="cfg_corpus_path").input(str(corpus)).run()
    at = ask(app, "How do I calibrate the widget?")
    (turn,) = at.session_state["turns"]
    assert turn.payload.sets.cited == ("a",) and not turn.payload.rejected_citations
    (corpus / "a.md").write_text((corpus / "a.md").read_text().replace("twice", "three times"))  # edited since
    again = reload(at)  # the sidebar: the demo corpus
    (reopened,) = again.session_state["turns"]
    assert reopened.payload.rejected_citations == (), "not rejected against a corpus it was not asked with"
    assert reopened.payload.sets == turn.payload.sets
    warning = unescape("\n".join(w.value for w in again.warning))
    assert "Asked with corpus widgets" in warning and "which is not loaded" in warning, warning
    assert reopened.session is None and "Verify sources" not in labels(again), "no corpus to re-run it against"


# --- its provider options are stored (secrets never), so it can be verified again ----------------------------

SECRET = "s3cr3t-token-value"


class Keyed(scripted.OnlyFrom):
    """`OnlyFrom` with a recorded option (`style`) and a secret one (`token`, `writeOnly`), recording what it is
    built with."""

    name = "scripted-keyed"
    label = "scripted keyed (test)"
    options_schema = {"type": "object", "additionalProperties": False, "properties": {
        "style": {"type": "string", "title": "Style"}, "token": {"type": "string", "writeOnly": True, "title": "Token"}}}
    built: list[dict] = []

    def __init__(self, model=None, **options):
        super().__init__(model, **options)
        Keyed.built.append(dict(options))


@pytest.fixture
def keyed():
    register_provider(Keyed.name, Keyed)
    Keyed.built.clear()
    yield Keyed
    _PROVIDERS.unregister(Keyed.name)


def with_keyed(at: AppTest) -> AppTest:
    """The sidebar on the keyed provider, its style and token typed."""
    at.run()
    at.sidebar.selectbox(key="cfg_provider").set_value(Keyed.name).run()
    at.sidebar.text_input(key=f"cfg_opt_{Keyed.name}_style").input("terse").run()
    at.sidebar.text_input(key=f"cfg_opt_{Keyed.name}_token").input(SECRET).run()
    assert not at.exception, at.exception
    return at


def test_a_reopened_turn_is_verified_with_its_stored_options_and_the_sidebars_secret(app, keyed, tmp_path):
    at = ask(with_keyed(app), QUESTION)
    cid = at.session_state["conversation_id"]
    again = AppTest.from_file(APP, default_timeout=60)
    again.session_state["viewer_token"] = at.session_state["viewer_token"]  # a reload: the same browser
    with_keyed(again)
    again.query_params["conversation"] = cid
    again.run()
    (turn,) = again.session_state["turns"]
    assert turn.config.provider == Keyed.name and dict(turn.config.options) == {"style": "terse"}, \
        "the recorded options, the secret not among them"
    keyed.built.clear()
    again = click(again, "Verify sources")
    again = click(again, next(label for label in labels(again) if label.startswith("Run ")))
    (turn,) = again.session_state["turns"]
    assert turn.payload.verification is not None
    assert keyed.built and all(o == {"style": "terse", "token": SECRET} for o in keyed.built), keyed.built
    con = duckdb.connect(str(tmp_path / "traces.duckdb"), read_only=True)
    try:
        stored = " ".join(str(v) for (v,) in con.execute("SELECT config_json FROM runs").fetchall())
    finally:
        con.close()
    assert '"style": "terse"' in stored and SECRET not in stored, "options stored, secrets never"
