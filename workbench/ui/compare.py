"""The compare page's layout: 2–4 configurations answering one question, or one conversation, side by side.

A run of the page is a *job* kept in the session: its questions, its configurations and the columns finished
so far. With follow-up questions, each column asks them in order as one conversation of its own, each
follow-up with that column's earlier turns as history (docs/design.md §11). Columns run one at a time, each with its own progress box; between two columns the job checks
its stop flag, so "Cancel" stops it after the column that is running (a provider call is never cut), and
the finished columns stay. Any other click during a run (which makes Streamlit rerun the page) resumes
the job where it was instead of losing it. The click's run starts while the old run is still waiting on the running
column (Streamlit's `runner.fastReruns`): each step of the job is taken once, under the job's lock (`Job.lock`).
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field, replace

import streamlit as st

from ..context_policy import next_position
from ..errors import WorkbenchError
from ..payload import TurnConfig
from ..providers import provider_names
from ..render.escaping import display_text, escape_markdown, plotly_text
from ..render.sources import SET_COLORS
from ..retrieval import retriever_names
from ..trace.writer import COMPARE_RUN
from .asking import run
from .caches import get_session, provider_display, provider_info
from .open_conversation import history, new_id, places
from .provider_inputs import modes_for, protocol_picker
from .records import RunConfig, Turn
from .turn import render_turn

#: The order the set lists are shown in: the short, telling sets first, the long retrieved set last.
LIST_ORDER = ("cited", "consulted", "retrieved")
#: Documents a set list shows before "show all".
FIRST_SHOWN = 10
JOB = "cmp_job"
#: The most follow-up questions a compare job asks after its first (docs/security.md): each is one more turn
#: per column.
MAX_FOLLOWUPS = 5


def letter(i: int) -> str:
    return chr(65 + i)


def pick_configs(base: RunConfig, count: int) -> list[RunConfig]:
    """One row of provider × retriever × mode (× tool protocol) per column; every column starts from the
    sidebar's provider, retriever and mode; corpus and k come from the sidebar, and so do the sidebar
    provider's options, for the columns that use that provider."""
    names, rnames = provider_names(), retriever_names()
    configs = []
    cols = st.columns(count)
    for i, col in enumerate(cols):
        with col:
            st.markdown(f"**Configuration {letter(i)}**")
            st.session_state.setdefault(f"cmp_provider_{i}", base.provider)
            st.session_state.setdefault(f"cmp_retriever_{i}", base.retriever)
            provider = st.selectbox("Provider", names, key=f"cmp_provider_{i}", format_func=provider_display)
            modes = modes_for(provider)
            if st.session_state.get(f"cmp_mode_{i}") not in modes:
                st.session_state[f"cmp_mode_{i}"] = base.mode if base.mode in modes else modes[0]
            models = provider_info(provider)["models"]
            model = st.selectbox("Model", models, key=f"cmp_model_{i}_{provider}",
                                 format_func=display_text) if len(models) > 1 else None
            retriever = st.selectbox("Retriever", rnames, key=f"cmp_retriever_{i}")
            mode = st.radio("Mode", modes, key=f"cmp_mode_{i}", horizontal=True)
            protocol = protocol_picker(st, provider, f"cmp_protocol_{i}_{provider}") if mode == "agent" else None
            options = base.options if provider == base.provider else ()  # chosen for the sidebar's provider
            configs.append(replace(base, provider=provider, model=model, retriever=retriever, mode=mode,
                                   options=options, tool_protocol=protocol))
    return configs


# --- the job: one column at a time, with progress and a stop flag --------------------------------

#: Runs the columns' turns, so that a rerun of the page (a click) never interrupts a turn half-way: the
#: rerun finds the running turn's future in the job and waits on it again.
_WORKERS = ThreadPoolExecutor(max_workers=2, thread_name_prefix="compare")
#: How often a running column's progress box is refreshed (its elapsed time).
POLL_SECONDS = 0.5


@dataclass
class Job:
    question: str
    configs: list[RunConfig]
    #: Each finished column's turns: its conversation, one turn per question.
    columns: list[list[Turn]] = field(default_factory=list)
    cancelled: bool = False
    running: Future | None = None  # the conversation of column len(columns), while it runs
    started: float = 0.0
    followups: tuple[str, ...] = ()
    partial: list[Turn] = field(default_factory=list)  # the running column's turns so far
    #: Two script runs of one session may work the job at once: with Streamlit's `runner.fastReruns` (its default) a
    #: click starts the new run at once, while the old one stops only at its next Streamlit call, both waiting on the
    #: running column. Its steps (submit a column, record a finished one) are taken under this lock, each once.
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    @property
    def questions(self) -> tuple[str, ...]:
        return (self.question, *self.followups)

    @property
    def finished(self) -> bool:
        return len(self.columns) == len(self.configs) or (self.cancelled and self.running is None)


def followup_lines(text: str) -> tuple[str, ...]:
    """The follow-up questions typed one per line (blank lines skipped); more than `MAX_FOLLOWUPS` is refused."""
    lines = tuple(line.strip() for line in (text or "").splitlines() if line.strip())
    if len(lines) > MAX_FOLLOWUPS:
        raise WorkbenchError(f"at most {MAX_FOLLOWUPS} follow-up questions (one per line), not {len(lines)}")
    return lines


def start(question: str, configs: list[RunConfig], followups: tuple[str, ...] = ()) -> None:
    """A new job (replacing any other, whose running turn still finishes and is traced); `advance` runs it."""
    st.session_state[JOB] = Job(question, list(configs), followups=tuple(followups))
    st.session_state.pop("cmp_turns", None)
    st.session_state.pop("cmp_conversations", None)


def converse(questions: tuple[str, ...], cfg: RunConfig, session, done: list[Turn]) -> list[Turn]:
    """Ask `questions` in order with `cfg`, each follow-up with the earlier turns as history (one conversation of
    its own; a single question is a single turn), appending each turn to `done` as it finishes. The column's turns
    are one run of kind `COMPARE_RUN`, so the chat's past conversations leave its conversation out."""
    cid = new_id() if len(questions) > 1 else None
    tracer = getattr(session, "tracer", None)
    run_id = tracer.new_run(kind=COMPARE_RUN) if tracer is not None else None
    for q in questions:
        done.append(run(q, cfg, session, history=history(done), conversation_id=cid,
                        position=next_position(places(done)) if cid else None, run_id=run_id))
    return done


def _cancel() -> None:
    job = st.session_state.get(JOB)
    if job is not None and not job.finished:
        job.cancelled = True


def _status_label(i: int, cfg: RunConfig, state: str) -> str:
    return escape_markdown(f"{letter(i)} · {short_description(cfg)} · {state}")


def _done_label(i: int, job: Job) -> str:
    seconds = sum(t.elapsed_ms for t in job.columns[i]) / 1000
    return _status_label(i, job.configs[i], f"done in {seconds:.1f} s")


def _failed(column: list[Turn]) -> bool:
    return any(t.error for t in column)


def _submit(job: Job) -> tuple[int, Future] | None:
    """The running column's index and future: the next column submitted now unless another script run of the
    session did (None: the job is over)."""
    with job.lock:
        if job.running is None and not job.finished:
            cfg = job.configs[len(job.columns)]
            try:  # the session is resolved here, in the page's script thread (its cache and spinner need it)
                session = get_session(cfg.corpus, cfg.retriever, cfg.db)
            except (WorkbenchError, OSError):
                session = None  # `run` meets the same error and makes it the column's `Turn.error`
            job.partial = []
            job.running = _WORKERS.submit(converse, job.questions, cfg, session, job.partial)
            job.started = time.monotonic()
        return None if job.running is None else (len(job.columns), job.running)


def _record(job: Job, running: Future, column: list[Turn]) -> None:
    """`running`'s `column` becomes the job's next finished column, unless another script run of the session (one
    a click is stopping, waiting on the same future) recorded it already: a column is recorded once."""
    with job.lock:
        if job.running is running:
            job.columns.append(column)
            job.running = None


def advance() -> None:
    """Run the current job's remaining columns, one progress box per column, checking the stop flag
    between columns; at the end (or on cancel) its finished turns become the page's result."""
    job: Job | None = st.session_state.get(JOB)
    if job is None:
        return
    if not job.finished:
        control = st.empty()  # the Cancel button while the job runs, emptied when it ends
        if job.cancelled:
            control.info(f"Cancelling: column {letter(len(job.columns))} finishes first.", icon="⏹")
        else:
            control.button("Cancel", key="cmp_cancel", on_click=_cancel, icon="⏹",
                           help="Stops after the column that is running; the finished columns are kept")
        boxes = []
        for i, (col, cfg) in enumerate(zip(st.columns(len(job.configs)), job.configs)):
            with col:
                if i < len(job.columns):
                    boxes.append(st.status(_done_label(i, job), state="error" if _failed(job.columns[i]) else "complete"))
                else:
                    boxes.append(st.status(_status_label(i, cfg, "waiting"), state="running"))
        while not job.finished:  # the flag is set by the Cancel button's callback, seen between columns
            step = _submit(job)
            if step is None:
                break
            i, running = step
            while True:
                try:
                    column = running.result(timeout=POLL_SECONDS)
                    break
                except FutureTimeout:  # a rerun (a click) may stop the script here: the turn runs on
                    at = f" · turn {min(len(job.partial) + 1, len(job.questions))} of {len(job.questions)}" \
                        if len(job.questions) > 1 else ""
                    boxes[i].update(label=_status_label(i, job.configs[i], f"running ({i + 1} of {len(job.configs)})"
                                                        f"{at} · {time.monotonic() - job.started:.0f} s"), state="running")
            _record(job, running, column)
            boxes[i].update(label=_done_label(i, job), state="error" if _failed(column) else "complete")
        control.empty()
    st.session_state["cmp_conversations"] = job.columns
    st.session_state["cmp_turns"] = [column[-1] for column in job.columns]  # each column's last (or only) turn
    if job.cancelled and len(job.columns) < len(job.configs):
        skipped = ", ".join(letter(i) for i in range(len(job.columns), len(job.configs)))
        st.warning(f"Cancelled: {len(job.columns)} of {len(job.configs)} columns ran; not run: {skipped}.", icon="⏹")


# --- the result ----------------------------------------------------------------------------------


def _set(turn: Turn, name: str) -> tuple[str, ...]:
    """The turn's set `name` (docs/design.md §1); empty for a turn without a payload."""
    return getattr(turn.payload.sets, name) if turn.payload is not None else ()


def differences(turns: list[Turn]) -> dict[str, dict[str, set[str]]]:
    """Per set, the doc ids each column has that not every other column has (what to highlight)."""
    out: dict[str, dict[str, set[str]]] = {}
    for name in LIST_ORDER:
        per = [set(_set(t, name)) for t in turns]
        common = set.intersection(*per) if per else set()
        out[name] = {t.turn_id: s - common for t, s in zip(turns, per)}
    return out


def _parts(turn_or_cfg: Turn | RunConfig) -> list[str]:
    if isinstance(turn_or_cfg, Turn):
        ran = turn_or_cfg.payload.config if turn_or_cfg.payload is not None else TurnConfig()
        text = turn_or_cfg.config.describe(turn_or_cfg.provider_label, ran.model_label, ran.tool_protocol)
    else:
        text = turn_or_cfg.describe()
    return text.split(" · ")


def _chosen(part: str) -> bool:
    """Whether a part of a description is one a compare column chooses (not the sidebar's k or corpus)."""
    return not part.startswith(("k ", "corpus "))


def short_description(cfg: RunConfig) -> str:
    """Provider, model, retriever, mode and tool protocol: what a compare column chooses."""
    return " · ".join(p for p in cfg.describe().split(" · ") if _chosen(p))


def labels(turns: list[Turn]) -> tuple[list[str], str]:
    """Each column named by its description: the parts of it that not every column shares (all of it when
    the columns are alike), after its letter; and the shared parts, once."""
    parts = [_parts(t) for t in turns]
    shared = [p for p in parts[0] if all(p in other for other in parts[1:])] if parts else []
    names = []
    for i, ps in enumerate(parts):
        own = [p for p in ps if p not in shared] or [p for p in ps if _chosen(p)]
        names.append(f"{letter(i)} · " + " · ".join(own))
    return names, " · ".join(shared)


def sizes_figure(turns: list[Turn]):
    """Horizontal grouped bars, one group per configuration named by its description, each bar with its
    count written on it (readable whether a set holds 1 document or 59)."""
    import plotly.graph_objects as go

    names, shared = labels(turns)
    names = [plotly_text(n) for n in names]
    fig = go.Figure()
    most = 0
    for name in reversed(LIST_ORDER):  # horizontal bars stack upwards: consulted drawn on top, then cited
        counts = [len(_set(t, name)) for t in turns]
        most = max([most, *counts])
        fig.add_bar(name=name, y=names, x=counts, orientation="h", marker_color=SET_COLORS[name], text=counts,
                    textposition="outside", cliponaxis=False)
    fig.update_layout(barmode="group", height=90 + 75 * len(turns), margin=dict(l=0, r=30, t=30, b=0),
                      title=dict(text=plotly_text(f"Set sizes · all: {shared}" if shared else "Set sizes"),
                                 font=dict(size=13)),
                      xaxis=dict(title="documents", rangemode="tozero", tickformat="d", nticks=8,
                                 range=[0, max(most, 1) * 1.12]),
                      yaxis=dict(autorange="reversed", automargin=True), legend=dict(traceorder="reversed"))
    return fig


def _doc_lines(turn: Turn, name: str, only: set[str]) -> list[str]:
    titles = {d.doc_id: d.title for d in turn.payload.documents} if turn.payload is not None else {}
    lines = []
    for doc_id in _set(turn, name):
        title = escape_markdown(titles.get(doc_id) or doc_id)
        lines.append(f"- :violet-background[{title}] :violet-badge[differs]" if doc_id in only else f"- {title}")
    return lines


def set_list(col, turn: Turn, name: str, only: set[str]) -> None:
    """A set's documents in a column: the first `FIRST_SHOWN`, the rest behind "Show all"."""
    lines = _doc_lines(turn, name, only)
    col.markdown(f"**{name.capitalize()}** ({len(lines)})  \n" + ("\n".join(lines[:FIRST_SHOWN]) or "_none_"))
    if len(lines) > FIRST_SHOWN:
        with col.expander(f"Show all {len(lines)} {name}"):
            st.markdown("\n".join(lines[FIRST_SHOWN:]))


#: An answer longer than this (lines or characters) scrolls in a box of `ANSWER_HEIGHT` px, every column's
#: alike, so that a listing of 59 titles does not push the set lists below it thousands of pixels down.
LONG_ANSWER = (20, 1500)
ANSWER_HEIGHT = 480


def answer_height(turns: list[Turn]) -> int | str:
    long = any(len(a.splitlines()) > LONG_ANSWER[0] or len(a) > LONG_ANSWER[1]
               for a in ((t.payload.answer if t.payload is not None else "") or "" for t in turns))
    return ANSWER_HEIGHT if long else "content"


#: A source chip (a Streamlit markdown badge) keeps to one line and cuts its title with "…": in a Compare column of
#: ~180 px (1024 px with the sidebar open, three columns) "Set up SSO wit…". In a column it wraps instead, its
#: background following each line. A constant: no visitor's text.
_CHIPS_WRAP = """<style>
[class*="st-key-cmp-col-"] .stMarkdownBadge {
  white-space: normal !important; overflow: visible !important; text-overflow: clip !important;
  overflow-wrap: anywhere; -webkit-box-decoration-break: clone; box-decoration-break: clone;
}
</style>"""


def show_conversations(columns: list[list[Turn]]) -> None:
    """Each column's conversation, turn by turn: one block of answers and sets per question (a single question:
    one block, as `show`)."""
    st.html(_CHIPS_WRAP)
    positions = max((len(c) for c in columns), default=0)
    for p in range(positions):
        row = [c[p] for c in columns if p < len(c)]
        if positions > 1:
            st.markdown(f"#### Turn {p + 1}: {escape_markdown(display_text(row[0].question, ' '))}")
        show(row, suffix="" if p == 0 else f"-t{p + 1}")


def show(turns: list[Turn], suffix: str = "") -> None:
    """Side by side, one turn per column; `suffix` tells the widget keys of a conversation's later turns apart."""
    diff = differences(turns)
    st.plotly_chart(sizes_figure(turns), width="stretch", config={"displayModeBar": False}, key=f"cmp-sizes{suffix}")
    # One row per block, so answers and each of the three sets line up across the columns.
    height = answer_height(turns)
    for i, (col, turn) in enumerate(zip(st.columns(len(turns)), turns)):
        with col, st.container(key=f"cmp-col-{i}{suffix}", border=True, height=height):
            st.markdown(f"### {letter(i)}")
            render_turn(turn, viewer=False, details=False)
    for name in LIST_ORDER:
        for turn, col in zip(turns, st.columns(len(turns))):
            set_list(col, turn, name, diff[name].get(turn.turn_id, set()))
