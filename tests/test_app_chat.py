"""The chat page (app.py) under Streamlit's AppTest: real library, offline provider, demo corpus."""

from __future__ import annotations

import re

from streamlit.proto.TextInput_pb2 import TextInput as TextInputProto
from streamlit.testing.v1 import AppTest

from apptest import ask, texts, unescape
from workbench.errors import ProviderError
from workbench.providers.base import ModelStep, Provider, register_provider


class BrokenProvider(Provider):
    """Registered like any outside provider; fails the way a down server does."""

    name = "broken-test"
    label = "broken (test)"

    def complete(self, messages, tools) -> ModelStep:
        raise ProviderError("cannot reach the model server at 127.0.0.1:9; start it or pick another provider")


register_provider("broken-test", BrokenProvider)


def new_conversation(at: AppTest) -> AppTest:
    """The "New conversation" button: the next question is not a follow-up of the last (issue 22)."""
    return at.button(key="new-conversation").click().run()


def captions(at: AppTest) -> list[str]:
    return [unescape(c.value) for c in at.caption]


def test_first_render_shows_sidebar_with_registered_providers_and_retrievers(app):
    assert not app.exception
    assert app.title[0].value == "Provenance Workbench"
    provider = app.sidebar.selectbox(key="cfg_provider")
    assert provider.value == "offline"
    assert "offline (no LLM)" in provider.options
    assert "broken (test)" in provider.options, "providers come from the registry"
    from workbench.retrieval import retriever_names
    assert app.sidebar.selectbox(key="cfg_retriever").options == retriever_names()
    assert app.sidebar.radio(key="cfg_mode").value == "agent"
    from workbench.providers.offline import FAULTS
    assert app.sidebar.multiselect(key="cfg_opt_offline_faults").options == list(FAULTS)
    assert {"corrupt_id", "forget_link", "link_listed", "cite_unretrieved"} <= set(FAULTS)


def test_a_question_renders_answer_citations_sources_and_provenance(app):
    at = ask(app, "How do I configure SSO?")
    md = texts(at)
    turn_id = at.session_state["turns"][0].turn_id  # the inline citation opens the side panel (a `#` link)
    assert f"From [Configure SAML single sign-on \\(SSO\\)](<#wb-cite-{turn_id}-0>) :blue-badge[1]" in md
    assert "https://help.orbitly.example" not in md, "no link leaves the chat for a new tab"
    assert "**Sources** :green-badge[" in md
    assert "**Retrieved** (" in md and "**Cited** (" in md and "**Consulted** (" in md
    assert any("offline (no LLM)" in c and "retriever bm25" in c for c in captions(at)), \
        "the active configuration is shown with the turn"
    pills = at.get("button_group")
    assert pills and pills[0].options[0].startswith("1 · Configure SAML")
    assert [e.label for e in at.expander][:2] == ["Provenance", "Tool calls (2)"]


def test_clicking_a_citation_opens_the_document_with_the_evidence_highlighted(app):
    at = ask(app, "How do I configure SSO?")
    pills = at.get("button_group")[0]
    pills.set_value(at.session_state["turns"][0].payload.citations[0].doc_id).run()
    assert not at.exception
    md = texts(at)
    assert "#### Configure SAML single sign\\-on \\(SSO\\)" in md
    assert ":orange-background[" in md, "the quoted passage is highlighted"


def test_listing_answer_has_links_and_no_sources_row(app):
    at = ask(app, "Which articles do you have?")
    md = texts(at)
    assert md.count("](<#wb-cite-") > 20
    assert "**Sources**" not in md
    assert any("No sources: nothing was read" in c for c in captions(at))
    assert not [e.label for e in at.expander if e.label.startswith("Claims")], "titles are not factual claims"


def test_claims_expander_only_for_substantive_answers(app):
    at = ask(app, "How do I bake a sourdough loaf?")
    assert not [e.label for e in at.expander if e.label.startswith("Claims")], "a refusal is not a claim"
    at = ask(new_conversation(at), "How do I configure SSO?")
    labels = [e.label for e in at.expander if e.label.startswith("Claims")]
    assert len(labels) == 1 and labels[0] != "Claims (0)", labels


def test_switching_retriever_and_mode_changes_the_turn(app):
    from workbench.retrieval import retriever_names

    app.sidebar.radio(key="cfg_mode").set_value("excerpts")
    other = [r for r in retriever_names() if r != "bm25"]
    if other:
        app.sidebar.selectbox(key="cfg_retriever").set_value(other[0])
    at = ask(app.run(), "How do I configure SSO?")
    turn = at.session_state["turns"][-1]
    assert turn.payload.mode == "excerpts"
    assert turn.config.retriever == (other[0] if other else "bm25")
    assert ":blue-badge[" in texts(at)
    assert any("mode excerpts" in c for c in captions(at))


def test_fault_toggle_shows_rejected_citation_with_reason(app):
    app.sidebar.multiselect(key="cfg_opt_offline_faults").set_value(["corrupt_id"])
    at = ask(app.run(), "How do I configure SSO?")
    md = texts(at)
    assert ":orange-badge[⚠ rejected citation\\: not retrieved \\(nearest retrieved\\: sso\\-saml\\-setup" in md


def test_provider_error_is_a_message_not_a_traceback(app):
    app.sidebar.selectbox(key="cfg_provider").set_value("broken-test")
    at = ask(app.run(), "How do I configure SSO?")
    assert not at.exception
    errors = [e.value for e in at.error]
    assert any("cannot reach the model server" in e for e in errors), errors
    assert any("broken (test)" in c for c in captions(at))


def test_local_model_and_openai_appear_with_labels_default_model_and_tool_protocol(app):
    provider = app.sidebar.selectbox(key="cfg_provider")
    assert {"local model (llama.cpp)", "OpenAI-compatible server"} <= set(provider.options)
    at = provider.select("llamacpp").run()
    assert not at.exception
    model = at.sidebar.text_input(key="cfg_model_llamacpp")
    assert model.placeholder.startswith("default: SmolLM2-135M-Instruct") and "(default model)" in model.placeholder
    protocol = at.sidebar.radio(key="cfg_protocol_llamacpp")
    assert protocol.options == ["native", "json-steps"] and protocol.value == "json-steps"  # declared, not named
    # option inputs come from each provider's options_schema
    assert {"cfg_opt_llamacpp_n_ctx", "cfg_opt_llamacpp_threads", "cfg_opt_llamacpp_max_tokens"} <= {
        n.key for n in at.sidebar.number_input}
    at = at.sidebar.selectbox(key="cfg_provider").select("openai").run()
    assert at.sidebar.radio(key="cfg_protocol_openai").value == "native"
    assert at.sidebar.text_input(key="cfg_opt_openai_api_key").proto.type == TextInputProto.PASSWORD
    assert at.sidebar.text_input(key="cfg_opt_openai_base_url").label == "Base URL"
    at = at.sidebar.selectbox(key="cfg_provider").select("offline").run()
    assert not [r for r in at.sidebar.radio if r.key == "cfg_protocol_offline"]  # no JSON-schema output: no choice


# --- issue 25: tool calls at a glance, the placeholder, "Verify sources" --------------------------


def _plotly(at: AppTest, key_prefix: str) -> dict:
    import json

    charts = [c for c in at.get("plotly_chart") if json.loads(c.proto.spec).get("data")]
    found = [json.loads(c.proto.spec) for c in charts if key_prefix in c.proto.id]
    assert found, f"no chart {key_prefix}"
    return found[-1]


def test_tool_calls_show_their_arguments_and_a_timeline(app):
    at = ask(app, "How do I configure SSO?")
    md = unescape(texts(at))
    assert '**1.** search(query="How do I configure SSO?", k=5) · `snippet`' in md, "arguments at a glance"
    assert '**2.** fetch_document(doc_id="sso-saml-setup") · `full`' in md
    bars = _plotly(at, "timeline-")["data"][0]
    assert bars["y"] == ["model call 1", "#1 search", "model call 2", "#2 fetch_document", "model call 3"]
    record = at.session_state["turns"][0].answer.record
    latencies = [record.model_calls[0].latency_ms, record.tool_calls[0].latency_ms, record.model_calls[1].latency_ms,
                 record.tool_calls[1].latency_ms, record.model_calls[2].latency_ms]
    assert bars["x"] == latencies, "each bar is as long as the call took"
    assert bars["base"] == [sum(latencies[:i]) for i in range(5)], "end to end on one time axis"


def test_the_placeholder_comes_from_the_loaded_corpus(app, tmp_path, monkeypatch):
    assert "How do I configure SSO" not in app.chat_input[0].proto.placeholder
    assert app.chat_input[0].proto.placeholder == "Ask the knowledge base, e.g. “How do I turn on two-factor authentication?”"
    corpus = tmp_path / "boards"
    corpus.mkdir()
    (corpus / "a.md").write_text("---\nid: a\ntitle: Upload a sketch to the board\n---\nOpen the IDE and press Upload.\n")
    (corpus / "b.md").write_text("---\nid: b\ntitle: Board overview\n---\nThe board has pins.\n")
    monkeypatch.setenv("WORKBENCH_ALLOWED_ROOTS", str(tmp_path))
    app.sidebar.radio(key="cfg_corpus_source").set_value("Folder or JSONL path").run()
    app.sidebar.text_input(key="cfg_corpus_path").input(str(corpus)).run()
    assert not app.exception
    assert app.chat_input[0].proto.placeholder == "Ask the knowledge base, e.g. “How do I upload a sketch to the board?”"
    assert "How do I upload a sketch to the board?" in unescape(app.info[0].value)  # literal markdown (a title)


def test_verify_sources_is_offered_only_on_an_answer_that_consulted_something(app):
    at = ask(app, "Which articles do you have?")
    assert "Verify sources" not in [b.label for b in at.button], "a listing read nothing: nothing to verify"
    at = ask(new_conversation(at), "How do I bake a sourdough loaf?")
    assert "Verify sources" not in [b.label for b in at.button], "an answer that found nothing"
    at = ask(new_conversation(at), "How do I configure SSO?")
    assert [b.label for b in at.button].count("Verify sources") == 1


def test_the_default_local_model_says_plainly_it_cannot_pick_tools_in_agent_mode(app):
    """Issue 30: SmolLM2-135M in agent mode lists and searches in circles; the app says so before the turn."""
    at = app.sidebar.selectbox(key="cfg_provider").select("llamacpp").run()
    warnings = [unescape(w.value) for w in at.sidebar.warning]
    assert any("cannot pick tools sensibly" in w and "excerpt mode" in w for w in warnings), warnings
    at = at.sidebar.radio(key="cfg_mode").set_value("excerpts").run()
    assert not any("cannot pick tools" in unescape(w.value) for w in at.sidebar.warning)
    at = at.sidebar.selectbox(key="cfg_provider").select("offline").run()
    at = at.sidebar.radio(key="cfg_mode").set_value("agent").run()
    assert not any("cannot pick tools" in unescape(w.value) for w in at.sidebar.warning)


def test_a_listing_asked_third_in_a_conversation_gets_no_claims_as_when_asked_alone(app):
    """Issue 41 item 4: "What articles do you have?" at position 3 links documents the earlier turns read in full;
    those links are still a listing (docs/design.md §11 rule 3e), so no claim is judged, as when it is asked alone."""
    at = ask(ask(ask(app, "How do I configure SSO?"), "And what about Okta?"), "What articles do you have?")
    listing = at.session_state["turns"][-1]
    assert listing.answer.record.history and listing.payload.position == 3
    assert any(d.exposure == "full" for d in listing.payload.documents if d.cited), "it links what was read before"
    assert listing.faithfulness.answer_kind == "listing" and not listing.faithfulness.claims
    labels = [e.label for e in at.expander if e.label.startswith("Claims")]
    assert len(labels) == 2, labels  # the two SSO answers' only


def _title_id(title: str) -> str:
    from workbench.config import DEMO_CORPUS
    from workbench.corpus import load_corpus

    (doc,) = [d for d in load_corpus(DEMO_CORPUS).documents if d.title == title]
    return doc.doc_id


#: Each question the demo suggests (the chat's placeholder and hint, and the README's), with the article a human
#: would pick for it, by its title in the demo corpus (None: a listing, which consults nothing).
SUGGESTED = {"placeholder": "Turn on two-factor authentication", "Which articles do you have?": None,
             "How do I configure SSO?": "Configure SAML single sign-on (SSO)", "What articles do you have?": None}


def test_each_question_the_demo_suggests_is_answered_from_the_article_a_human_would_pick(app):
    """Issue 41 item 7: "How do I turn on two-factor authentication?" (the placeholder's) opened "Require two-factor
    authentication for all members" and linked the right article only as "See also"."""
    hint = unescape(next(i.value for i in app.info if i.value.startswith("Try")))
    placeholder = re.search(r"“(.+)”", app.chat_input[0].placeholder).group(1)
    assert placeholder == "How do I turn on two-factor authentication?" and placeholder in hint
    assert "Which articles do you have?" in hint
    for question, title in SUGGESTED.items():
        question = placeholder if question == "placeholder" else question
        at = ask(new_conversation(app) if app.session_state["turns"] else app, question)
        turn = at.session_state["turns"][-1]
        opened = [c.args["doc_id"] for c in turn.payload.tool_calls if c.name == "fetch_document"]
        if title is None:
            assert not turn.payload.sets.consulted and not opened, question
        else:
            assert opened == [_title_id(title)], (question, opened)
            assert turn.payload.sources[0].doc_id == _title_id(title), question  # the first chip is that article
