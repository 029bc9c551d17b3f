"""The app's "Verify sources" action (Streamlit AppTest, real library): verdict chips, the verdicts explained,
and for a provider whose calls cost, the cost stated and a confirmation before anything runs."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

import scripted
from apptest import ask, texts, unescape


@pytest.fixture(scope="module", autouse=True)
def providers():
    scripted.register()
    yield
    scripted.unregister()


def click(at: AppTest, label: str) -> AppTest:
    next(b for b in at.button if b.label == label).click().run()
    assert not at.exception, at.exception
    return at


def test_offline_answers_are_verified_at_once_and_chips_carry_the_verdicts(app, tmp_path):
    at = ask(app, "How do I configure SSO?")
    assert "Provenance" in [e.label for e in at.expander]
    assert "Not verified" in unescape("\n".join(c.value for c in at.caption))
    at = click(at, "Verify sources")
    md = unescape(texts(at))
    assert ":green-badge[Configure SAML single sign-on (SSO) · load-bearing]" in md
    assert ":gray-badge[Set up SSO with Microsoft Entra ID (Azure AD) · decorative]" in md
    assert "- :green-badge[load-bearing] the answer changed without it" in md  # the Provenance expander explains
    assert "**Configure SAML single sign-on (SSO)**: load-bearing: without it the answer changed" in md
    assert "Verify sources" not in [b.label for b in at.button], "a verified answer offers no second verification"
    turn = at.session_state["turns"][0]
    from workbench.trace import TraceReader

    rows = TraceReader(tmp_path / "traces.duckdb").rows(
        "SELECT doc_id, verdict FROM source_verdicts WHERE turn_id = ? AND verdict IS NOT NULL",
        [turn.payload.turn_id])[1]
    assert dict(rows) == turn.payload.verification.verdicts, "written for the turn already traced"


def test_a_costly_provider_states_the_cost_and_runs_only_when_confirmed(app):
    app.sidebar.selectbox(key="cfg_provider").set_value("scripted-copier")
    at = ask(app.run(), "How do I configure SSO?")
    at = click(at, "Verify sources")
    warning = unescape("\n".join(w.value for w in at.warning))
    assert "This costs real model calls. Verifying re-runs this turn 5 times with scripted copier (test)" in warning
    assert "The original turn made 3 model calls, so expect about 15 extra calls." in warning
    assert at.session_state["turns"][0].payload.verification is None, "nothing runs before it is confirmed"
    assert not at.info, "it has no reproducibility options to warn about"
    at = click(at, "Cancel")
    assert at.session_state["turns"][0].payload.verification is None and not at.warning
    at = click(at, "Verify sources")
    at.number_input(key=next(k for k in at.session_state if str(k).startswith("verify-budget-"))).set_value(3).run()
    assert "re-runs this turn 3 times" in unescape("\n".join(w.value for w in at.warning))
    at = click(at, "Run 3 re-runs")
    v = at.session_state["turns"][0].payload.verification
    assert v.extra_turns == 3 and v.verdicts["sso-saml-setup"] == "load_bearing" and len(v.skipped) == 2
    assert "no verdict" in unescape(texts(at))


def test_a_turn_asked_without_the_reproducible_options_is_warned_about(app):
    app.sidebar.selectbox(key="cfg_provider").set_value("scripted-sampler")
    at = click(ask(app.run(), "How do I configure SSO?"), "Verify sources")
    info = unescape("\n".join(i.value for i in at.info))
    assert "The re-runs use temperature 0.0, seed 0 so that they are reproducible, but this turn was asked with " \
           "temperature (unset), seed (unset): the control may not reproduce it" in info


def test_hidden_influence_is_shown_beside_the_sources_row(app):
    app.sidebar.selectbox(key="cfg_provider").set_value("scripted-copier")
    at = ask(app.run(), "How do I configure SSO?")
    at = click(click(at, "Verify sources"), "Run 5 re-runs")
    md = unescape(texts(at))
    assert "**Hidden influence** :orange-badge[Set up SSO with Okta · hidden influence]" in md


def test_untrusted_titles_and_reasons_in_the_explanation_are_escaped():
    def page():
        from workbench.payload import DocumentEntry, Payload, VerificationSummary
        from workbench.ui.verify import explain

        evil = "[click](javascript:alert(1)) <script>x</script> :red[boom]"
        from types import SimpleNamespace

        explain(SimpleNamespace(payload=Payload(  # a turn: its payload is all a verified turn's explanation reads
            "", documents=(DocumentEntry("d", evil, None, True, True, "full", "read"),),
            verification=VerificationSummary.from_json(
                {"method": "ablation-v1", "control_stable": True, "extra_calls": 1,
                 "verdicts": {"d": "load_bearing"}, "control": {"reason": evil},
                 "details": {"d": {"reason": evil}}}))))

    at = AppTest.from_function(page).run()
    assert not at.exception
    md = texts(at)
    assert "](javascript" not in md and "<script>" not in md and ":red[" not in md
    assert "\\[click\\]\\(javascript\\:alert\\(1\\)\\)" in md
