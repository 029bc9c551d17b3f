"""The chat page's own script and style, fixed text with no visitor's or model's text in it: the script that makes
inline citations open the side panel, keeps what was clicked in place and follows a question asked into view
(`LINKS_JS`), the side panel's layout (`PANEL_CSS`) and the style that hides the pills' placeholders
(`SKELETON_CSS`). Mounted by `ui/panel.py`."""

from __future__ import annotations


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


LINKS_JS = """
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
    if (!asked || movedByHand()) { asked = null; return; }
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
  const onPress = (event) => {
    held = true;
    ours = scroller().scrollTop;  // where the chat was at the press; our own scrolls move it on
    if (onScrollbar(event)) stopFollowing();
  };
  const onRelease = () => { held = false; };
  // checked before each scroll of ours too: a drag's scroll must not be undone before its scroll event comes
  const movedByHand = () => held && ours !== null && Math.abs(scroller().scrollTop - ours) > 1;
  const onScroll = () => { if (asked && movedByHand()) stopFollowing(); };
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


PANEL_CSS = """
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


# Where pills belong, a skeleton is never shown (see `inline_citation_links`); the preloading widget neither.
SKELETON_CSS = """<style>
[class*="st-key-citations-"] [data-testid="stSkeleton"], .st-key-pills-preload, .st-key-page-style { display: none; }
</style>"""
