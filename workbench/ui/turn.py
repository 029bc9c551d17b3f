"""Draw one turn: the answer with clickable citations, the honest sources row, provenance, tool calls.

All text from the corpus or the model goes through `render.escaping.escape_markdown` / `render.answer_links.answer_markdown`
(or a widget that never parses markdown, such as `st.json` and `st.dataframe`).
"""

from __future__ import annotations

import functools
from functools import partial

import streamlit as st

from ..payload import DocumentEntry, Payload, Source, TurnConfig
from ..types import TRUNCATED, HistoryTurn
from ..render.answer_links import answer_markdown, citation_entries, read_in_turn, rejection_text
from ..render.document import document_markdown
from ..render.escaping import display_text, display_value, escape_markdown, plotly_text, safe_url
from ..render.highlight import evidence_passages, highlight_spans
from ..render.sources import REJECTED_COLOR, SET_COLORS, SETS, Headline, headline, source_chips, verdicts
from ..render.timeline import call_signature, timeline
from . import audited, verify as verification
from .state import Turn

OPEN_DOC = "open_doc"  # session_state key: (turn_id, citation key) shown in the side panel
MAX_INLINE_PILLS = 8

# --- inline citations open the side panel ------------------------------------------------------
#
# Streamlit opens every markdown link in a new tab (a new session: the conversation is gone), except a
# `#…` link. So in the chat an inline citation links to `#wb-cite-<turn id>-<i>` (its i-th citation
# entry), and this script-only component, mounted once on the page, catches clicks on such links and
# hands the target to Python as a trigger, which opens the panel like the citation's pill does. The
# script is ours and fixed; it reads only the `href` of a link the app built, and the target is looked
# up among the session's turns, never trusted. The document's own URL is the panel's "Open original".
#
# Opening or closing the panel narrows or widens the chat, so its text reflows and what the reader was
# looking at would drift off screen; and Streamlit's own stick-to-bottom scroll follows the chat down
# whenever it grows while the reader is at its end. So the script pins what was clicked (the citation
# link or pill; for the panel's ✕, the open citation's pill, else the chat message in view) to where it
# was on screen, frame by frame, until the rerun the click started is over and nothing has moved for
# QUIET_MS, or the reader scrolls, clicks elsewhere, types or resizes the window. It waits for the rerun
# itself (Streamlit's `data-test-script-state` going to `running` and back), not for a time: on a loaded
# machine the rerun starts seconds late. If Streamlit re-renders the pinned element, it is found again
# (pill: its turn's container and index; link: its href; message: its index).
LINK_PREFIX = "wb-cite-"
LINKS_KEY = "wb-inline-citations"
STILL_ATTR = "data-wb-pointer-still"  # on <html> while the pointer that opened the panel has not moved
_LINKS_JS = """
export default function(component) {
  const { setTriggerValue } = component;
  const QUIET_MS = 800, LIMIT_MS = 120000, HEADER_PX = 72, STILL_PX = 4;
  const scroller = () => document.querySelector('[data-testid="stAppScrollToBottomContainer"]')
    || document.scrollingElement;
  const runState = () => document.querySelector('[data-testid="stApp"]')?.getAttribute('data-test-script-state');
  const PILLS = '[class*="st-key-citations-"]';
  const MESSAGES = '[data-testid="stChatMessage"]';
  let anchor = null, frame = 0;
  const pinned = (el, find) => {
    const now = performance.now();
    anchor = { el, find, top: el.getBoundingClientRect().top, since: now, ran: false, quiet: now };
    if (!frame) frame = requestAnimationFrame(loop);
  };
  const pill = (button) => {  // found again by its turn's container and its place in it
    const box = button.closest(PILLS);
    const key = [...box.classList].find((c) => c.startsWith('st-key-citations-'));
    const i = [...box.querySelectorAll('button')].indexOf(button);
    return () => document.querySelector('.' + CSS.escape(key))?.querySelectorAll('button')[i] || null;
  };
  const link = (a) => {
    const href = a.getAttribute('href');
    return () => [...document.querySelectorAll('a[href^="#%(prefix)s"]')].find((x) => x.getAttribute('href') === href) || null;
  };
  const inView = (el) => { const r = el.getBoundingClientRect(); return r.bottom > 0 && r.top < window.innerHeight; };
  const message = () => {  // the chat message the reader is looking at, found again by its index
    const all = [...document.querySelectorAll(MESSAGES)];
    const i = all.findIndex((m) => m.getBoundingClientRect().bottom > window.innerHeight / 3);
    return i < 0 ? null : [all[i], () => document.querySelectorAll(MESSAGES)[i] || null];
  };
  const restore = () => {
    if (!anchor) return;
    const now = performance.now();
    if (!anchor.el.isConnected) anchor.el = anchor.find();
    if (!anchor.el || now - anchor.since > LIMIT_MS) { anchor = null; return; }
    const state = runState();
    if (state === 'running' || state === 'rerunRequested') { anchor.ran = true; anchor.quiet = now; }
    const drift = anchor.el.getBoundingClientRect().top - anchor.top;
    if (Math.abs(drift) > 1) { scroller().scrollTop += drift; anchor.quiet = now; }
    if (anchor.ran && now - anchor.quiet > QUIET_MS) anchor = null;  // the rerun is over and all is still
  };
  const loop = () => { frame = 0; restore(); follow(); if (anchor || asked) frame = requestAnimationFrame(loop); };
  const onMutations = (records) => {
    follow();
    stillCheck();
    if (!anchor) return;
    // a rerun that started and ended between two frames still counts
    if (records.some((r) => r.attributeName === 'data-test-script-state' && r.oldValue === 'running')) anchor.ran = true;
    restore();
  };
  // Where the panel opens over the chat (a narrow window), its close button can open right under the pointer that
  // clicked the citation: hovered at once, and a second click there (a double click) would close what just opened.
  // So where it lies under that pointer, the close button ignores the pointer (`STILL_ATTR`, in the panel's CSS)
  // until the pointer moves.
  let still = null;
  const stillCheck = () => {
    if (!still) return;
    const r = document.querySelector('.st-key-close-doc button')?.getBoundingClientRect();
    const under = r && still.x >= r.left && still.x <= r.right && still.y >= r.top && still.y <= r.bottom;
    if (under) document.documentElement.setAttribute('%(still)s', '');
    else document.documentElement.removeAttribute('%(still)s');
  };
  const onMove = (event) => {
    if (still && Math.hypot(event.clientX - still.x, event.clientY - still.y) > STILL_PX) {
      still = null;
      document.documentElement.removeAttribute('%(still)s');
    }
  };
  const opening = (event) => { still = { x: event.clientX, y: event.clientY }; stillCheck(); };
  const onClick = (event) => {
    anchor = null;
    const el = event.target instanceof Element ? event.target : null;
    if (!el) return;
    const a = el.closest('a[href^="#%(prefix)s"]');
    if (a) {
      event.preventDefault();
      opening(event);
      pinned(a, link(a));
      setTriggerValue('open', a.getAttribute('href').slice(1));
    } else if (el.closest(PILLS + ' button')) {
      opening(event);
      pinned(el.closest('button'), pill(el.closest('button')));
    } else if (el.closest('.st-key-close-doc button')) {
      const open = document.querySelector(PILLS + ' [aria-checked="true"]');
      const button = open && (open.closest('button') || open);
      const found = button && inView(button) ? [button, pill(button)] : message();
      if (found) pinned(...found);
    }
  };
  // A question asked: once its turn is drawn, the new question and answer scroll into view, even when the reader
  // had scrolled up to an earlier answer (Streamlit follows the chat down only from its bottom). Until the run is
  // over, unless the reader scrolls first.
  let asked = null;
  const onAsk = () => {
    asked = { count: document.querySelectorAll(MESSAGES).length, ran: false };
    if (!frame) frame = requestAnimationFrame(loop);
  };
  const follow = () => {
    if (!asked) return;
    const state = runState();
    if (state === 'running' || state === 'rerunRequested') asked.ran = true;
    const all = document.querySelectorAll(MESSAGES);
    if (all.length > asked.count) {
      const question = all[asked.count];
      const off = question.getBoundingClientRect().top - HEADER_PX;  // its top just under Streamlit's header
      if (Math.abs(off) > 8) { scroller().scrollTop += off; ours = scroller().scrollTop; }
    }
    if (asked.ran && state === 'notRunning' && all.length > asked.count + 1) asked = null;
  };
  const onKey = (event) => {
    if (event.key === 'Enter' && !event.shiftKey && event.target instanceof Element
        && event.target.closest('[data-testid="stChatInputTextArea"]') && event.target.value.trim()) onAsk();
  };
  const onSend = (event) => {
    if (event.target instanceof Element && event.target.closest('[data-testid="stChatInputSubmitButton"]')) onAsk();
  };
  // The reader scrolls, and is left where they scroll to: a wheel, a touch, a scrolling key outside a text field,
  // a press on a scrollbar (on the scrolled element, outside its client area) or, where scrollbars lie over the
  // content, a scroll we did not make while a pointer is held down (a drag of the scrollbar).
  let held = false, ours = null;
  const stopFollowing = () => { asked = null; };
  const SCROLL_KEYS = ['PageUp', 'PageDown', 'Home', 'End', 'ArrowUp', 'ArrowDown', ' '];
  const onScrollKey = (event) => {
    const typing = event.target instanceof Element && event.target.closest('input, textarea, select, [contenteditable]');
    if (!typing && SCROLL_KEYS.includes(event.key)) stopFollowing();
  };
  const onScrollbar = (event) => {
    const el = event.target;
    if (!(el instanceof Element) || !el.clientWidth || el.scrollHeight <= el.clientHeight) return false;
    const r = el.getBoundingClientRect();
    return event.clientX >= r.left + el.clientLeft + el.clientWidth
      || event.clientY >= r.top + el.clientTop + el.clientHeight;
  };
  const onPress = (event) => { held = true; if (onScrollbar(event)) stopFollowing(); };
  const onRelease = () => { held = false; };
  const onScroll = () => {
    if (held && asked && Math.abs(scroller().scrollTop - (ours ?? -1)) > 1) stopFollowing();
  };
  const PRESSES = [['pointerdown', onPress], ['pointerup', onRelease], ['pointercancel', onRelease], ['pointermove', onMove],
                   ['keydown', onScrollKey], ['scroll', onScroll]];
  const stop = () => { anchor = null; };
  const STOPS = ['wheel', 'touchstart', 'keydown', 'pointerdown'];  // the reader takes the page back
  const observer = new MutationObserver(onMutations);
  observer.observe(document.body, { childList: true, subtree: true, attributes: true, attributeOldValue: true,
                                    characterData: true });
  document.addEventListener('scroll', restore, true);  // Streamlit's stick-to-bottom scrolls after the reflow
  document.addEventListener('click', onClick, true);
  STOPS.forEach((name) => document.addEventListener(name, stop, true));
  window.addEventListener('resize', stop);
  document.addEventListener('keydown', onKey, true);
  document.addEventListener('click', onSend, true);
  ['wheel', 'touchstart'].forEach((name) => document.addEventListener(name, stopFollowing, true));
  PRESSES.forEach(([name, handler]) => document.addEventListener(name, handler, true));
  return () => {
    PRESSES.forEach(([name, handler]) => document.removeEventListener(name, handler, true));
    document.removeEventListener('keydown', onKey, true);
    document.removeEventListener('click', onSend, true);
    ['wheel', 'touchstart'].forEach((name) => document.removeEventListener(name, stopFollowing, true));
    observer.disconnect();
    if (frame) cancelAnimationFrame(frame);
    document.removeEventListener('scroll', restore, true);
    document.removeEventListener('click', onClick, true);
    STOPS.forEach((name) => document.removeEventListener(name, stop, true));
    window.removeEventListener('resize', stop);
  };
}
""" % {"prefix": LINK_PREFIX, "still": STILL_ATTR}
# The side panel sits at the top of its column: when the reader is further down the chat, it would open out
# of sight. Sticky, it stays in view as the chat scrolls (within its column, under Streamlit's header).
# Below `PANEL_OVERLAY_PX` of window width, a column beside the chat would squeeze it (at 1024 px, with the
# sidebar open, to ~270 px: chips cut mid-title, the panel's title one word a line). There the chat keeps the
# whole width and the panel opens over its right side, under Streamlit's header, scrolling on its own.
PANEL_OVERLAY_PX = 1200
_PANEL_CSS = """
html[%s] .st-key-close-doc, html[%s] .st-key-close-doc * {
  pointer-events: none;
}
[data-testid="stLayoutWrapper"]:has(> .st-key-doc-panel) {
  position: sticky;
  top: 4rem;
}
@media (max-width: %dpx) {
  [data-testid="stHorizontalBlock"]:has(.st-key-doc-panel) > [data-testid="stColumn"]:first-child {
    flex: 1 1 100%% !important;
    width: 100%% !important;
    max-width: 100%% !important;
  }
  [data-testid="stColumn"]:has(.st-key-doc-panel) {
    position: fixed;
    top: 3.75rem;
    right: 0.5rem;
    width: min(440px, calc(100vw - 1rem)) !important;
    max-width: min(440px, calc(100vw - 1rem)) !important;
    max-height: calc(100vh - 4.5rem);
    overflow-y: auto;
    z-index: 999990;
    background-color: Canvas;
    border-radius: 0.5rem;
    box-shadow: 0 0.25rem 1.5rem rgba(0, 0, 0, 0.25);
    padding: 0.5rem;
  }
}
""" % (STILL_ATTR, STILL_ATTR, PANEL_OVERLAY_PX)  # several lines: Streamlit takes a one-line css= for a file path
_links_component = None
# Where pills belong, a skeleton is never shown (see `inline_citation_links`); the preloading widget neither.
_SKELETON_CSS = """<style>
[class*="st-key-citations-"] [data-testid="stSkeleton"], .st-key-pills-preload, .st-key-page-style { display: none; }
</style>"""


def page_style() -> None:
    """The chat page's own style, first thing on the page (see `inline_citation_links`): a constant, no
    visitor's text. Markdown, because `st.html` and a component's CSS reach the page later than the pills'
    skeletons of a reopened conversation."""
    with st.container(key="page-style"):  # hidden by its own style: it takes no room
        st.markdown(_SKELETON_CSS, unsafe_allow_html=True)


def inline_citation_links(turns: list[Turn]) -> None:
    """Mount the component that makes the answers' inline citations open the side panel (once per page), and
    load the pills' widget before any answer needs it.

    Streamlit loads a pills widget's code the first time one is drawn and shows a grey skeleton bar until
    then (16 of them, for seconds, on a reopened conversation). A hidden pills widget drawn with the page
    loads that code before the first answer, and the CSS hides a skeleton where pills belong, so an answer's
    pills are drawn with it or not at all until they are ready."""
    global _links_component
    if _links_component is None:  # registered once per process: a second registration only warns
        _links_component = st.components.v2.component("workbench.inline_citations", js=_LINKS_JS, css=_PANEL_CSS,
                                                      isolate_styles=False)  # the CSS is for the page
    _links_component(key=LINKS_KEY, on_open_change=partial(_on_inline_citation, turns), height=0)
    with st.container(key="pills-preload"):
        st.pills("preload", ["·"], key="pills-preload-widget", label_visibility="collapsed", disabled=True)


def panel_targets(turn: Turn) -> dict[str, str]:
    """Citation key → the `#` link that opens it in the side panel."""
    entries = citation_entries(turn.payload) if turn.payload is not None else []
    return {e["key"]: f"#{LINK_PREFIX}{turn.turn_id}-{i}" for i, e in enumerate(entries)}


def _on_inline_citation(turns: list[Turn]) -> None:
    state = st.session_state.get(LINKS_KEY)
    target = (state.get("open") if isinstance(state, dict) else getattr(state, "open", None)) or ""
    for turn in turns:
        for key, href in panel_targets(turn).items():
            if href == f"#{target}":
                open_citation(turn, key)
                return


def open_citation(turn: Turn, key: str) -> None:
    """Show citation `key` of `turn` in the side panel, its pill selected and every other turn's cleared."""
    widget = _open_key(turn)
    st.session_state[widget] = key
    _on_cite(widget, turn.turn_id)


def config_caption(turn: Turn) -> None:
    if audited.caption(turn):  # an audited turn: the app it audited, not a configuration of ours
        return
    cfg = turn.config
    ran = turn.payload.config if turn.payload is not None else TurnConfig()
    described = cfg.describe(turn.provider_label, ran.model_label, ran.tool_protocol)
    st.caption(escape_markdown(f"⚙ {described} · {turn.recorded_ms:.0f} ms"))
    if turn.note:
        st.warning(escape_markdown(turn.note), icon="⚠️")


def render_turn(turn: Turn, *, viewer: bool = True, details: bool = True) -> None:
    """The assistant side of a turn (answer, citations, sources, expanders)."""
    config_caption(turn)
    if details:
        verification.run_pending(turn)  # before the chips are drawn, so they carry the verdicts
    payload = turn.payload
    if turn.error:
        st.error(escape_markdown(f"The turn failed: {turn.error}"), icon="🚫")
    elif payload is not None and payload.status == TRUNCATED:
        st.warning(escape_markdown(f"This answer is incomplete: {payload.error}"), icon="✂️")
    audited.status(payload)
    trace_error = getattr(turn.answer, "trace_error", None)
    if trace_error:
        st.warning(escape_markdown(f"This turn was not traced: {trace_error}"), icon="⚠️")
    if payload is not None and payload.answer:
        st.markdown(answer_markdown(payload, panel_targets(turn) if viewer else None))
    elif not turn.error:
        st.info("The provider returned an empty answer.")
    if payload is None:
        return
    if viewer:
        citation_buttons(turn)
    trust_headline(turn)
    sources_row(turn)
    if details:
        verification.hidden_influence(payload)
        verification.verify_action(turn)
        with st.expander("Provenance", expanded=False):
            provenance_sets(payload)
            carried_list(turn)
            verification.explain(turn)
            audited.details(payload)
        with st.expander(f"Tool calls ({len(payload.tool_calls)})", expanded=False):
            tool_calls(payload)
            if turn.answer is not None:
                call_timeline(turn)
        claims(turn)


def _open_key(turn: Turn) -> str:
    return f"cite-{turn.turn_id}"


def _on_cite(widget_key: str, turn_id: str) -> None:
    value = st.session_state.get(widget_key)
    current = st.session_state.get(OPEN_DOC)
    if value:
        st.session_state[OPEN_DOC] = (turn_id, value)
        for key in list(st.session_state):  # one document open at a time: clear the other turns' pills
            if isinstance(key, str) and key.startswith("cite-") and key != widget_key:
                st.session_state[key] = None
    elif current and current[0] == turn_id:
        st.session_state[OPEN_DOC] = None


def _close(widget_key: str) -> None:
    st.session_state[OPEN_DOC] = None
    st.session_state[widget_key] = None


def citation_buttons(turn: Turn) -> None:
    """The inline badges' targets: one pill per valid citation; clicking opens the side panel."""
    entries = citation_entries(turn.payload) if turn.payload is not None else []
    if not entries:
        return
    by_key = {e["key"]: e for e in entries}
    key = _open_key(turn)

    def pills():
        st.pills("Open a cited document", list(by_key), key=key,
                 # pill labels are markdown: a title such as ![x](http://host/x.png) must stay text
                 format_func=lambda k: escape_markdown(f"{by_key[k]['marker']} · {by_key[k]['title']}"),
                 on_change=_on_cite, args=(key, turn.turn_id), label_visibility="collapsed")

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


def carried_documents(turn: Turn) -> list[tuple[DocumentEntry, HistoryTurn | None]]:
    """The turn's carried documents (docs/design.md §11), each with the earlier turn (`HistoryTurn`) that read
    it, or None when the record does not hold that turn, in the order of the turns."""
    record = getattr(turn.answer, "record", None)
    earlier = {h.record.turn_id: h for h in getattr(record, "history", ())}
    documents = turn.payload.documents if turn.payload is not None else ()
    carried = [d for d in documents if d.carried_from]
    carried.sort(key=lambda d: d.carried_position or 0)
    return [(d, earlier.get(d.carried_from)) for d in carried]


def carried_list(turn: Turn) -> None:
    """In the Provenance expander: each document this turn had from an earlier one, with that turn."""
    carried = carried_documents(turn)
    if not carried:
        return
    lines = []
    for d, h in carried:
        asked = f" (“{display_text(h.record.question, ' ')}”)" if h is not None else ""
        lines.append(f"- **{escape_markdown(d.title or d.doc_id)}** · "
                     f"{escape_markdown(carried_text(d) + asked)} · `{d.exposure}`")
    st.markdown(f"**Carried from earlier turns** ({len(carried)})  \n" + "\n".join(lines))


def _call_name(payload: Payload, idx: int | None) -> str:
    calls = payload.tool_calls
    if idx is None:
        return "excerpt"
    if 0 <= idx < len(calls):
        return f"#{idx + 1} {calls[idx].name}"
    return f"#{idx + 1}"


def provenance_sets(payload: Payload) -> None:
    """Retrieved | cited | consulted side by side, each document with why it is (not) consulted."""
    if audited.no_sources(payload):  # unauditable: it claims no set (the audit part of the expander says why)
        return
    docs = {d.doc_id: d for d in payload.documents}
    # Beside an open side panel the chat is too narrow for three columns (at 1024 px a column is ~70 px and
    # words break mid-word): the sets then stand one under another.
    cols = [st.container() for _ in SETS] if st.session_state.get(OPEN_DOC) else st.columns(3)
    for col, name in zip(cols, SETS):
        ids = getattr(payload.sets, name)
        with col:
            st.markdown(f"**{name.capitalize()}** ({len(ids)})")
            lines = []
            for doc_id in ids:
                d = docs.get(doc_id)
                if d is None:  # a set member without its document entry: only the id is known
                    lines.append(f"- **{escape_markdown(doc_id)}**  \n  `?` · excerpt · ")
                    continue
                via = _call_name(payload, d.tool_call)
                if d.excerpts:
                    via = "excerpt " + ", ".join(f"[{n}]" for n in d.excerpts)
                if d.carried_from:  # its tool call or excerpt is the earlier turn's (the reason names it)
                    via = "carried"
                gen = f" · {d.label}" if d.label and d.label != "Source text" else ""
                lines.append(f"- **{escape_markdown(d.title or doc_id)}**{escape_markdown(gen)}  \n"
                             f"  `{d.exposure}` · {escape_markdown(via)} · "
                             f"{escape_markdown(d.reason or '')}")
            if name == "cited":
                for r in payload.rejected_citations:
                    lines.append(f"- :orange-badge[⚠ rejected] {escape_markdown(str(r.target))}  \n"
                                 f"  {escape_markdown(rejection_text(r))}")
            st.markdown("\n".join(lines) if lines else "_none_")
    sizes = tuple(len(getattr(payload.sets, n)) for n in SETS) + (len(payload.rejected_citations),)
    st.plotly_chart(_sizes_figure(sizes), width="stretch", config={"displayModeBar": False},
                    key=f"sets-{payload.turn_id}")


@functools.lru_cache(maxsize=256)
def _sizes_figure(sizes: tuple[int, ...]):
    """The sizes bar chart, built once per set of sizes: every rerun redraws every turn (benchmarks/app_speed.py)."""
    import plotly.graph_objects as go

    names = list(SETS) + ["rejected"]
    fig = go.Figure(go.Bar(x=list(sizes), y=names, orientation="h", text=list(sizes),
                           marker_color=[SET_COLORS.get(n, REJECTED_COLOR) for n in names]))
    fig.update_layout(height=170, margin=dict(l=0, r=10, t=10, b=0), yaxis=dict(autorange="reversed"),
                      xaxis=dict(dtick=1))
    return fig


def tool_calls(payload: Payload) -> None:
    calls = payload.tool_calls
    if not calls:
        st.caption("No tool calls (excerpt mode hands the model numbered excerpts instead).")
        return
    for i, c in enumerate(calls):
        latency = f"{c.latency_ms:.1f} ms" if c.latency_ms is not None else "—"
        st.markdown(f"**{i + 1}.** {escape_markdown(call_signature(c.name, c.args))} · "
                    f"`{c.exposure}` · {latency} · {len(c.doc_ids)} documents")
        st.json(display_value({"args": dict(c.args), "returned": list(c.doc_ids)}), expanded=False)
        if c.error:
            st.warning(escape_markdown(f"error: {c.error}"), icon="⚠️")
        if c.cut:
            st.caption(escape_markdown(f"✂ cut to fit the model's context: {c.cut.get('reason', '')}"))


#: The timeline's bar colour per kind of call.
CALL_COLORS = {"model": "#7f5fbf", "tool": "#f28e2b", "retrieval": SET_COLORS["retrieved"]}


def call_timeline(turn: Turn) -> None:
    """Model calls and tool calls on one time axis with their latencies: the span view of Phoenix or Langfuse."""
    rows = audited.timeline_rows(turn) or timeline(turn.answer.record)
    if not rows:
        return
    fig = _timeline_figure(tuple((r["kind"], r["label"], r["detail"], r["start_ms"], r["ms"]) for r in rows))
    st.plotly_chart(fig, width="stretch", config={"displayModeBar": False}, key=f"timeline-{turn.turn_id}")


@functools.lru_cache(maxsize=256)
def _timeline_figure(rows: tuple[tuple[str, str, str, float, float], ...]):
    """The timeline's figure, built once per set of rows (every click reruns the page; figures are dear)."""
    import plotly.graph_objects as go

    fig = go.Figure(go.Bar(
        y=[plotly_text(label) for _, label, _, _, _ in rows], x=[ms for *_, ms in rows],
        base=[start for _, _, _, start, _ in rows], orientation="h",
        marker_color=[CALL_COLORS[kind] for kind, *_ in rows],
        text=[f"{ms:.1f} ms" for *_, ms in rows], textposition="outside", cliponaxis=False,
        hovertext=[plotly_text(detail or label) for _, label, detail, _, _ in rows], hoverinfo="text+x"))
    fig.update_layout(height=60 + 26 * len(rows), margin=dict(l=0, r=40, t=24, b=0), showlegend=False,
                      title=dict(text="Timeline (ms from the turn's start)", font=dict(size=13)),
                      yaxis=dict(autorange="reversed", type="category"), xaxis=dict(rangemode="tozero"))
    return fig


def claims(turn: Turn) -> None:
    """Per-claim faithfulness verdicts, worded as the judge earned them (`ui/claims.py`)."""
    from .claims import show

    show(turn)


# --- the side panel ----------------------------------------------------------------------------


def document_panel(turns: list[Turn]) -> None:
    """The cited document opened from a citation pill, with what the model saw or quoted highlighted."""
    opened = st.session_state.get(OPEN_DOC)
    turn = next((t for t in turns if opened and t.turn_id == opened[0]), None)
    entry = None
    if turn is not None and turn.payload is not None:
        entry = next((e for e in citation_entries(turn.payload) if e["key"] == opened[1]), None)
    if entry is None or turn.session is None:
        st.caption("Click a citation under an answer to open the document here.")
        return
    doc = turn.session.corpus.get(entry["doc_id"])
    with st.container(key="doc-panel", border=True):
        with st.container(horizontal=True, vertical_alignment="top"):  # ✕ keeps its width in a narrow panel
            st.markdown(f"#### {escape_markdown(entry['title'])}", width="stretch")
            # no tooltip: at 1024 px the button can open under the pointer that clicked the pill, and a tooltip
            # then covered the title; its label says what it does
            st.button("Close", icon=":material/close:", key="close-doc", on_click=_close, args=(_open_key(turn),),
                      width="content")
        meta = [f"id {entry['doc_id']}", entry.get("label") or "Source text"]
        if entry.get("n") is not None:
            meta.append(f"excerpt [{entry['n']}]")
        st.caption(escape_markdown(" · ".join(meta)))
        url = safe_url(entry.get("url"))
        if url:
            st.link_button("Open original", url)
        if doc is None:
            st.warning("This document is not in the loaded corpus any more.")
            return
        passages = evidence_passages(turn.answer.record, doc.doc_id)
        if entry.get("n") is not None:  # the cited excerpt, not every excerpt of the document
            cited = [e.text for e in turn.answer.record.excerpts if e.n == entry["n"]]
            passages = [("excerpt", t) for t in cited] + [p for p in passages if p[0] == "quoted"]
        spans = highlight_spans(doc.text, passages)
        st.caption(":orange-background[quoted in the answer] · :blue-background[passage the model was shown]")
        with st.container(height=560, key="doc-text"):
            st.markdown(document_markdown(doc.text, spans))
