"""Under an answer: its citation pills (which open the side panel), its trust headline and its sources row, each
source chip with its verdict and the earlier turn that read it."""

from __future__ import annotations

import streamlit as st

from ..payload import DocumentEntry, Source
from ..render.answer_links import citation_entries, read_in_turn
from ..render.escaping import escape_markdown
from ..render.sources import Headline, headline, source_chips, verdicts
from . import audited, verify as verification
from .panel import on_cite, open_key
from .records import Turn

MAX_INLINE_PILLS = 8


def citation_buttons(turn: Turn) -> None:
    """The inline badges' targets: one pill per valid citation; clicking opens the side panel."""
    entries = citation_entries(turn.payload) if turn.payload is not None else []
    if not entries:
        return
    by_key = {e["key"]: e for e in entries}
    key = open_key(turn)

    def pills():
        st.pills("Open a cited document", list(by_key), key=key,
                 # pill labels are markdown: a title such as ![x](http://host/x.png) must stay text
                 format_func=lambda k: escape_markdown(f"{by_key[k]['marker']} · {by_key[k]['title']}"),
                 on_change=on_cite, args=(key, turn.turn_id), label_visibility="collapsed")

    if len(entries) <= MAX_INLINE_PILLS:
        with st.container(key=f"citations-{turn.turn_id}"):
            pills()
    else:
        # a listing's links are no sources: "cited" above "0 sources" would read as a contradiction
        what = "cited documents" if source_chips(turn.payload) else "linked documents (links, not sources)"
        with st.expander(f"Open one of the {len(entries)} {what}"):
            with st.container(key=f"citations-{turn.turn_id}"):
                pills()


#: The headline's terms, in words for someone who does not build RAG systems: its hover text.
HEADLINE_HELP = (
    "**sources**: the documents the answer was written from — read in full, or seen as a search snippet and "
    "cited. A link to a document only listed by title is not a source.\n\n"
    "**load-bearing**: a source the answer needs: asked again without it, the answer changes. "
    "**decorative**: a source the answer survives without (a \"see also\"). **not verified**: nobody has run that "
    "check yet (\"Verify sources\" re-runs the turn without each source). **control unstable**: asked again with "
    "nothing withheld, the answer already changed, so the check proves nothing.\n\n"
    "**rejected**: citations of documents the assistant was never given — fabricated links, shown as plain text "
    "with ⚠, never as sources.")


def headline_icon(line: Headline) -> str:
    """The headline's icon (Streamlit's own Material font): a shield with a check only for a verified answer with no
    rejected citation; a shield with a cross when a citation was rejected; a shield with "!" otherwise."""
    if line.rejected:
        return ":material/gpp_bad:"
    if line.load_bearing is not None and not line.unstable:
        return ":material/verified_user:"
    return ":material/gpp_maybe:"


def trust_headline(turn: Turn) -> None:
    """One line above the sources row: "2 sources · 1 load-bearing · 0 rejected" (`render.sources.headline`), from the
    payload its chips are drawn from, so a verification (run now, or stored with a reopened turn) shows in both. Its
    terms are explained on hover (`HEADLINE_HELP`)."""
    line = headline(turn.payload)
    with st.container(key=f"headline-{turn.turn_id}"):
        st.markdown(f"{headline_icon(line)} " + escape_markdown(line.text()), help=HEADLINE_HELP)


def sources_row(turn: Turn) -> None:
    """Only consulted chips (an absent `consulted` flag means show, docs/design.md §2), each with its verdict
    when the turn was verified by ablation (an absent `verification` means unverified)."""
    chips = source_chips(turn.payload)
    if not chips:
        st.caption(audited.no_sources(turn.payload) or "No sources: nothing was read to answer this.")
        return
    judged = verdicts(turn.payload)
    badges = []
    for s in chips:
        tag = f" · {s.label}" if s.label and s.label != "Source text" else ""
        if s.exposure_position is not None or s.carried_position is not None:  # docs/design.md §11: read earlier
            tag += f" · {read_text(s)}"
        badges.append(verification.badge(s.doc_id, (s.title or s.doc_id) + tag, judged))
    # A bordered box with an icon: nothing an answer can draw (its headings are demoted, `:` directives and
    # icons escaped), so a "# Sources" or "**Sources**" in an answer cannot pass for it (docs/security.md).
    with st.container(key=f"sources-{turn.turn_id}", border=True):
        st.markdown(":material/fact_check: **Sources** " + " ".join(badges))


def carried_text(entry: Source | DocumentEntry) -> str:
    """Where a carried document came from: "read in turn 1" (`render.answer_links.read_in_turn`)."""
    return read_in_turn(entry.carried_position, entry.carried_from)


def read_text(entry: Source | DocumentEntry) -> str:
    """The earlier turn whose reading makes a chip's document consulted: "read in turn 1". Its `exposure_from`
    (set also when this turn saw the document more weakly, e.g. a snippet of a document turn 1 opened), else
    its `carried_from` (a server from before `exposure_from`)."""
    if entry.exposure_position is not None:
        return read_in_turn(entry.exposure_position, entry.exposure_from)
    return carried_text(entry)
