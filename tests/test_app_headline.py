"""An answer's trust headline (issue 34 item 3): "2 sources · 1 load-bearing · 0 rejected", from the payload its
chips are drawn from (`render.headline`), under AppTest with the real library and a real trace database: before
and after "Verify sources", after a reload of a verified conversation, for a listing, and with a fabricated
citation (the offline provider's `corrupt_id` fault)."""

from __future__ import annotations

import pytest

from apptest import ask, unescape
from test_app_reopen import click, reload
from workbench.payload import Payload
from workbench.render.sources import Headline, headline, source_chips, verdicts

#: The headline's icons, written out here: verified (a shield with a check), not verified (with "!"), a rejected
#: citation (with a cross).
ICONS = {"verified": ":material/verified_user: ", "unverified": ":material/gpp_maybe: ",
         "rejected": ":material/gpp_bad: "}


def headline_elements(at) -> list:
    return [m for m in at.markdown if m.value.startswith(tuple(ICONS.values()))]


def headlines(at) -> list[str]:
    """Each answer's headline line, in the order of the turns."""
    return [unescape(m.value).split(" ", 1)[1] for m in headline_elements(at)]


def icons(at) -> list[str]:
    return [next(k for k, v in ICONS.items() if m.value.startswith(v)) for m in headline_elements(at)]


def expected(payload: Payload) -> str:
    """The headline counted here from the payload's own fields, not through `render.headline`."""
    n = len(source_chips(payload))
    if payload.verification is None:
        bearing = "not verified"
    else:
        bearing = f"{sum(v == 'load_bearing' for v in payload.verification.verdicts.values())} load-bearing"
    return f"{n} source{'' if n == 1 else 's'} · {bearing} · {len(payload.rejected_citations)} rejected"


def shown_turns(at) -> list[Payload]:
    return [t.payload for t in at.session_state["turns"]]


@pytest.mark.parametrize("counts, text", [
    ((1, None, 0), "1 source · not verified · 0 rejected"),
    ((2, 1, 0), "2 sources · 1 load-bearing · 0 rejected"),
    ((0, None, 0), "0 sources · not verified · 0 rejected"),
    ((3, 0, 2), "3 sources · 0 load-bearing · 2 rejected"),
    ((1, 1, 1), "1 source · 1 load-bearing · 1 rejected"),
])
def test_the_headline_reads_singular_and_plural(counts, text):
    assert Headline(*counts).text() == text


def test_an_unstable_control_earns_no_load_bearing_figure():
    assert Headline(2, 0, 0, unstable=True).text() == "2 sources · control unstable · 0 rejected"


def test_the_headline_agrees_with_the_chips_before_and_after_verifying_and_after_a_reload(app):
    at = ask(app, "How do I configure SSO?")
    payload = shown_turns(at)[0]
    assert payload.verification is None and len(source_chips(payload)) >= 2
    assert headlines(at) == [expected(payload)]
    assert headlines(at)[0].endswith("· not verified · 0 rejected")
    at = click(at, "Verify sources")
    payload = shown_turns(at)[0]
    judged = verdicts(payload)
    assert "load_bearing" in judged.values(), "the demo's SSO answer has a load-bearing source"
    assert headlines(at) == [expected(payload)]
    assert headline(payload).load_bearing == sum(v == "load_bearing" for v in judged.values())
    assert "not verified" not in headlines(at)[0]
    reopened = reload(at)  # the verification stored with the turn, read back from the trace database
    assert headlines(reopened) == headlines(at)
    assert [verdicts(p) for p in shown_turns(reopened)] == [judged]


def test_a_listing_has_a_headline_of_no_sources(app):
    at = ask(app, "Which articles do you have?")
    payload = shown_turns(at)[0]
    assert not source_chips(payload)
    assert headlines(at) == ["0 sources · not verified · 0 rejected"]


def test_a_fabricated_citation_counts_as_rejected_and_every_turn_agrees_with_its_payload(app):
    app.sidebar.multiselect(key="cfg_opt_offline_faults").set_value(["corrupt_id"]).run()
    at = ask(app, "How do I configure SSO?")
    faulty = shown_turns(at)[0]
    assert faulty.rejected_citations, "corrupt_id cites an id one character off"
    assert headlines(at) == [expected(faulty)]
    assert headline(faulty).rejected == len(faulty.rejected_citations) >= 1
    at.sidebar.multiselect(key="cfg_opt_offline_faults").set_value([]).run()
    for question in ("How do I set up SSO with Okta?", "Which articles do you have?"):
        at = ask(at, question)
    payloads = shown_turns(at)
    assert len(payloads) == 3
    assert headlines(at) == [expected(p) for p in payloads], "each turn's headline, from its own payload"
    assert [h.split(" · ")[-1] for h in headlines(at)][1:] == ["0 rejected", "0 rejected"]


# --- issue 41 item 6: the headline for someone who does not build RAG systems ---------------------------------


def test_each_state_has_its_own_icon_and_the_terms_are_explained_on_hover(app):
    at = ask(app, "How do I configure SSO?")
    assert icons(at) == ["unverified"], "not verified is no shield with a check"
    at = click(at, "Verify sources")
    assert icons(at) == ["verified"]
    (element,) = headline_elements(at)
    hover = element.proto.help
    for term in ("sources", "load-bearing", "decorative", "not verified", "rejected", "control unstable"):
        assert f"**{term}**" in hover, term
    at.sidebar.multiselect(key="cfg_opt_offline_faults").set_value(["corrupt_id"]).run()
    at = ask(at, "How do I set up SSO with Okta?")
    assert " · not verified · " in headlines(at)[-1] and headlines(at)[-1].endswith(" · 1 rejected")
    assert icons(at) == ["verified", "rejected"], "not verified · 1 rejected has its own icon"


def test_a_listing_does_not_call_its_links_cited_documents_above_0_sources(app):
    at = ask(app, "What articles do you have?")
    assert headlines(at) == ["0 sources · not verified · 0 rejected"]
    labels = [e.label for e in at.expander if e.label.startswith("Open one of")]
    assert labels == ["Open one of the 59 linked documents (links, not sources)"], labels
    assert "Nothing to verify: the answer read no source." in [unescape(c.value) for c in at.caption]


def test_the_claims_say_what_the_lexical_judge_is_in_one_line_with_the_figures_behind_a_popover(app):
    at = ask(app, "How do I configure SSO?")
    captions = [unescape(c.value) for c in at.caption]
    line = next(c for c in captions if c.startswith("The lexical judge"))
    assert line.count(". ") == 0 and len(line) < 160, "one line"
    (popover,) = [p for p in at.get("popover") if p.proto.popover.label.startswith("How far to trust it")]
    figures = "\n".join(m.value for m in popover.markdown)
    assert "AUROC 0.604 against 0.560" in figures and "held-out" in figures  # docs/faithfulness.md's figures
    assert "](" not in figures, "no link but the app's own citations"
