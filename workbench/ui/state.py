"""Sidebar configuration, cached sessions and running one turn for the app's pages."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import streamlit as st

from .. import questions
from ..config import DEFAULT_CONTEXT_TURNS, DEFAULT_K, DEFAULT_MODE, DEFAULT_PROVIDER, DEFAULT_RETRIEVER, DEMO_CORPUS, MAX_CONTEXT_TOKENS, MAX_CONTEXT_TURNS, default_db_path
from ..corpus import FOLDER_SUFFIXES, Corpus, load_corpus
from ..errors import ConversationMoved, PathNotAllowedError, WorkbenchError
from ..paths import DEFAULT_STORE, STORES_ENV, confine, confine_server, trace_stores
from ..payload import Payload, TurnConfig
from ..providers import declared, get_provider, provider_names, readiness, steps
from ..providers.options import input_kind, properties
from ..redact import recorded
from ..render.escaping import display_text, escape_markdown
from ..retrieval import retriever_names
from ..session import Answer, AskSpec, Session
from ..trace.lake import check_name, is_team_store
from ..types import ANSWERED, ContextPolicy
from . import identity
from .uploads import max_documents, max_pdf_content_bytes, save_upload, session_uploads

CORPUS_SOURCES = ("Demo corpus", "Folder or JSONL path", "Upload")


@dataclass(frozen=True)
class RunConfig:
    """One configuration a turn runs with (what the sidebar or a compare column selects)."""

    provider: str = DEFAULT_PROVIDER
    model: str | None = None
    retriever: str = DEFAULT_RETRIEVER
    mode: str = DEFAULT_MODE
    k: int = DEFAULT_K
    corpus: str = str(DEMO_CORPUS)
    corpus_label: str = "demo"
    #: The provider's options as (name, value) pairs, drawn from its `options_schema`; lists as tuples.
    options: tuple[tuple[str, Any], ...] = ()
    db: str | None = None
    #: The name the trace store `db` is offered under (`paths.trace_stores`): what links carry, never its path.
    store: str = DEFAULT_STORE
    tool_protocol: str | None = None  # agent mode: native | json-steps; None = the provider's default
    #: Who asks (the signed-in person, `turns.user_id`) and whose the turns are (`turns.owner`): `identity.Viewer`.
    user_id: str | None = None
    owner: str | None = None
    #: What of a conversation's earlier turns the model still has (docs/design.md §11), recorded with each turn.
    context: ContextPolicy = field(default_factory=ContextPolicy)

    def asked(self) -> AskSpec:
        """How a turn of this configuration is asked (`Session.ask`'s `AskSpec`): the tool protocol in agent mode only."""
        return AskSpec(provider=self.provider, model=self.model, mode=self.mode, k=self.k,
                       tool_protocol=self.tool_protocol if self.mode == "agent" else None,
                       options={name: list(v) if isinstance(v, tuple) else v for name, v in self.options})

    def describe(self, provider_label: str | None = None, model_label: str | None = None,
                 tool_protocol: str | None = None) -> str:
        """One line; the labels and protocol a turn actually ran with (its payload's config) win."""
        parts = [provider_label or provider_display(self.provider)]
        if model_label or self.model:
            parts.append(f"model {model_label or self.model}")
        parts += [f"retriever {self.retriever}", f"mode {self.mode}"]
        if self.mode == "agent" and (tool_protocol or self.tool_protocol):
            parts.append(f"tools {tool_protocol or self.tool_protocol}")
        parts += [f"k {self.k}", f"corpus {self.corpus_label}"]
        schema = declared(self.provider, "options_schema")
        props = properties(schema)
        for name, value in recorded(schema, dict(self.options)).items():  # a secret is never shown
            shown = ", ".join(map(str, value)) if isinstance(value, list) else value
            parts.append(f"{props.get(name, {}).get('title', name).lower()} {shown}")
        return " · ".join(parts)


@dataclass
class Turn:
    """One question as the app shows it: the config, the library's `Answer` (or an error)."""

    question: str
    config: RunConfig
    answer: Answer | None = None
    error: str | None = None
    elapsed_ms: float = 0.0
    session: Any = field(default=None, repr=False)
    llm_faithfulness: Any = None  # the answer's claims judged by the `llm` judge, when asked for (ui/claims.py)
    #: What the chat says beside the answer about how it is shown (a reopened turn asked with another corpus).
    note: str | None = None
    #: An audited turn's timeline: the spans it was assembled from (`trace.audits.span_timeline`); empty otherwise.
    spans: tuple = ()
    #: Shown to a reader of a shared conversation (`ui/shares.py`): nothing is re-run or judged for them.
    read_only: bool = False

    @property
    def faithfulness(self) -> Any:
        """The answer's own claim verdicts (`Answer.faithfulness`, judged and traced by Session.ask), not a copy."""
        return self.answer.faithfulness if self.answer is not None else None

    @property
    def payload(self) -> Payload | None:
        """The answer's sources payload; None for a turn that raised before it had one."""
        return self.answer.payload if self.answer is not None else None

    @property
    def recorded_ms(self) -> float:
        """The turn's time as its record (and the trace) has it, model calls and tools: the same when the turn
        is reopened; for a turn that raised before it had a record, the wall time of the ask."""
        latency = self.answer.record.latency_ms if self.answer is not None else None
        return float(latency) if latency is not None else self.elapsed_ms

    @property
    def turn_id(self) -> str:
        return (self.payload is not None and self.payload.turn_id) or f"err-{id(self)}"

    @property
    def provider_label(self) -> str:
        """The provider as the turn ran it (its payload's label), else as configured."""
        ran = self.payload.config if self.payload is not None else TurnConfig()
        return ran.provider_label or provider_display(self.config.provider)


# --- providers ---------------------------------------------------------------------------------


@st.cache_data(show_spinner=False, ttl=300)
def provider_info(name: str) -> dict[str, Any]:
    """Label and models of a provider; an error message instead of an exception."""
    try:
        p = get_provider(name)
    except Exception as exc:  # noqa: BLE001 - any provider failure is shown, never raised
        return {"label": name, "models": [], "error": str(exc)}
    info: dict[str, Any] = {"label": provider_display(name), "models": [], "error": None}
    try:
        info["models"] = list(p.list_models())
    except Exception as exc:  # noqa: BLE001
        info["error"] = f"cannot list models: {exc}"
    return info


@st.cache_data(show_spinner=False)
def provider_caps(name: str) -> dict[str, Any]:
    """What the pickers read from a provider's declarations (the tool protocols its capabilities allow, its
    default one) and the label of its default model."""
    protocols = steps.supported_protocols(name)
    try:
        p = get_provider(name)
        model, model_label = p.model, p.model_label
    except Exception:  # noqa: BLE001 - the picker still lists it; choosing it shows the error
        model = model_label = None
    return {"protocols": protocols or [steps.NATIVE], "default_protocol": declared(name, "default_tool_protocol"),
            "model": model, "model_label": model_label}


def protocol_picker(container, provider: str, key: str) -> str | None:
    """A radio of the tool protocols `provider` supports (its default first chosen); None when there is no choice."""
    caps = provider_caps(provider)
    if len(caps["protocols"]) < 2:
        return None
    options = caps["protocols"]
    index = options.index(caps["default_protocol"]) if caps["default_protocol"] in options else 0
    return container.radio("Tool protocol", options, index=index, horizontal=True, key=key,
                           help="native: the model's own tool calls · json-steps: every model output is forced by a "
                                "JSON schema to be one action (small local models need it)")


@st.cache_data(show_spinner=False)
def provider_display(name: str) -> str:
    """A provider's label ("offline (no LLM)"); constructing a provider touches no network."""
    try:
        label = getattr(get_provider(name), "label", name)
    except Exception:  # noqa: BLE001 - the picker still lists it; choosing it shows the error
        return name
    return label if label and label != "base" else name


# --- sessions ----------------------------------------------------------------------------------


def _fingerprint(path: str) -> str:
    """Changes when the corpus files change, so an edited folder gets a fresh session."""
    p = Path(path)
    try:
        files = [p] if p.is_file() else [f for f in p.rglob("*") if f.is_file()]
        return f"{len(files)}:{max((f.stat().st_mtime_ns for f in files), default=0)}"
    except OSError:
        return "missing"


def load_app_corpus(path: str) -> Corpus:
    """A corpus for the app: at most `WORKBENCH_MAX_DOCUMENTS` documents and `WORKBENCH_MAX_PDF_MB` of PDF
    page content in all (docs/security.md)."""
    return load_corpus(path, max_documents=max_documents(), pdf_content_bytes=max_pdf_content_bytes())


@st.cache_resource(show_spinner="Loading the corpus…", max_entries=16)
def _cached_corpus(path: str, fingerprint: str, limits: tuple[int, int]) -> Corpus:
    return load_app_corpus(path)


def _limits() -> tuple[int, int]:
    return max_documents(), max_pdf_content_bytes()  # in the key: a corpus loaded under other limits is not reused


def app_corpus(path: str) -> Corpus:
    """The corpus at `path`, loaded once per version of its files and shared by every page and session."""
    return _cached_corpus(path, _fingerprint(path), _limits())


@st.cache_resource(show_spinner="Loading the corpus and building its index…", max_entries=16)
def _cached_session(corpus: str, retriever: str, fingerprint: str, db: str | None) -> Session:
    session = Session.open(_cached_corpus(corpus, fingerprint, _limits()), retriever=retriever, trace_db=db)
    session.toolbox  # build (or load) the index now, not during the first question
    return session


def get_session(corpus: str, retriever: str, db: str | None = None) -> Session:
    """One cached session per (corpus files, retriever, trace database): turns reuse the loaded index."""
    return _cached_session(corpus, retriever, _fingerprint(corpus), db or str(default_db_path()))


def warm(cfg: RunConfig) -> str | None:
    """Load (or fetch from cache) the session for `cfg`; a user-facing message when that fails."""
    try:
        session = get_session(cfg.corpus, cfg.retriever, cfg.db)
    except (WorkbenchError, OSError) as exc:
        return escape_markdown(f"cannot load the corpus: {exc}")
    for line in session.corpus.skipped:
        st.warning(escape_markdown(line), icon="⚠️")
    return None


def example_question(cfg: RunConfig) -> str | None:
    """A question the loaded corpus can answer, from its source documents' titles (`questions.example_question`);
    None when it cannot be loaded or has no fitting title."""
    try:
        corpus = get_session(cfg.corpus, cfg.retriever, cfg.db).corpus
    except (WorkbenchError, OSError):
        return None
    return questions.example_question([d.title for d in corpus.documents if d.kind != "generated"])


def run(question: str, cfg: RunConfig, session: Session | None = None, *, history: Sequence[Any] = (),
        conversation_id: str | None = None, position: int | None = None, if_moved: str = "append",
        run_id: str | None = None) -> Turn:
    """Ask `question` with `cfg` (in `session`, else the cached one for `cfg`: a worker thread without the
    page's script context gets its session from the page); every failure becomes `Turn.error`, never an
    exception, but `ConversationMoved` (`if_moved="raise"`, `Session.log`), which the caller answers by asking
    again. A follow-up passes its conversation's earlier records as `history` (docs/design.md §11); `run_id` is a
    run declared for it (the Compare page's, `COMPARE_RUN`), else the interactive run of its configuration."""
    start = time.perf_counter()
    turn = Turn(question, cfg)
    try:
        turn.session = session or get_session(cfg.corpus, cfg.retriever, cfg.db)
        turn.answer = ask(turn.session, question, cfg, history=history, conversation_id=conversation_id,
                          position=position, if_moved=if_moved, run_id=run_id)
        payload = turn.answer.payload
        if payload.status not in ANSWERED:  # a truncated answer is shown, with its warning
            turn.error = payload.error or payload.status
    except ConversationMoved:
        raise
    except (WorkbenchError, ValueError, OSError) as exc:
        turn.error = str(exc)
    turn.elapsed_ms = (time.perf_counter() - start) * 1000
    return turn


def ask(session: Session, question: str, cfg: RunConfig, *, history: Sequence[Any] = (),
        conversation_id: str | None = None, position: int | None = None, if_moved: str = "append",
        run_id: str | None = None):
    """`Session.ask` with the sidebar's options; the session logs the turn to its trace database (in `run_id`, else
    its configuration's interactive run)."""
    return session.ask(question, cfg.asked(), history=history, conversation_id=conversation_id, position=position,
                       if_moved=if_moved, run_id=run_id, user_id=cfg.user_id, owner=cfg.owner, context=cfg.context)


def modes_for(provider: str) -> tuple[str, ...]:
    """The modes a provider can run (the rule lives in `providers.steps.supported_modes`)."""
    return steps.supported_modes(provider)


def option_inputs(container, provider: str) -> tuple[tuple[str, Any], ...]:
    """One input per property of the provider's `options_schema` (enum → select box, array of enums →
    multiselect, boolean → checkbox, integer / number → number input within the schema's minimum and
    maximum, string → text input, a `writeOnly` string → password input); returns the options set to
    something other than the default.
    A string naming a server (`"format": "uri"`) is kept only when the operator allows that server
    (`paths.confine_server`, docs/security.md)."""
    chosen = []
    for name, prop in properties(declared(provider, "options_schema")).items():
        kind = input_kind(prop)
        if kind is None:
            continue
        label, key, default = prop.get("title") or name, f"cfg_opt_{provider}_{name}", prop.get("default")
        helptext = prop.get("description")
        if kind == "select":
            options = list(prop["enum"])
            value = container.selectbox(label, options, index=options.index(default) if default in options else 0,
                                        key=key, help=helptext)
        elif kind == "multiselect":
            value = tuple(container.multiselect(label, prop["items"]["enum"], default=default or [], key=key,
                                                help=helptext))
        elif kind == "checkbox":
            value = container.checkbox(label, value=bool(default), key=key, help=helptext)
        elif kind in ("integer", "number"):
            cast = int if kind == "integer" else float  # the schema's bounds, in the input's own type
            low, high = (None if prop.get(b) is None else cast(prop[b]) for b in ("minimum", "maximum"))
            value = container.number_input(label, value=default, min_value=low, max_value=high, key=key,
                                           help=helptext, step=1 if kind == "integer" else None,
                                           placeholder="default")
        else:
            value = container.text_input(label, key=key, help=helptext, placeholder="default",
                                         type="password" if kind == "secret" else "default").strip() or None
            if value is not None and prop.get("format") == "uri":  # a server: the operator's, or one allowed
                value = _allowed(container, lambda: confine_server(value, label), "Using the default.")
        if value is not None and value != (tuple(default) if isinstance(default, list) else default):
            chosen.append((name, value))
    return tuple(chosen)


# --- sidebar -----------------------------------------------------------------------------------


#: Widget keys whose values every page keeps (Streamlit drops the state of a widget its page did not draw): the
#: sidebar's, and the Compare page's configurations, question and follow-ups (its results are session state).
KEPT = ("cfg_", "cmp_")
#: Buttons among them: a button's state cannot be set, and is no choice to keep.
_NOT_KEPT = frozenset({"cmp_cancel"})


def keep_config() -> None:
    """Keep the sidebar's and the Compare page's choices when switching pages (`KEPT`)."""
    for key in list(st.session_state):
        if isinstance(key, str) and key.startswith(KEPT) and key not in _NOT_KEPT:
            st.session_state[key] = st.session_state[key]


def default_db() -> str:
    return str(default_db_path())


def sidebar() -> RunConfig:
    """The sidebar of every page (who is signed in first); returns the active configuration."""
    viewer = identity.current()
    identity.signed_in_box(viewer)
    keep_config()
    names, rnames = provider_names(), retriever_names()
    defaults = {"cfg_provider": DEFAULT_PROVIDER if DEFAULT_PROVIDER in names else names[0],
                "cfg_retriever": DEFAULT_RETRIEVER if DEFAULT_RETRIEVER in rnames else rnames[0], "cfg_mode": DEFAULT_MODE,
                "cfg_k": DEFAULT_K, "cfg_corpus_source": CORPUS_SOURCES[0]}
    for key, value in defaults.items():  # defaults through session state: no widget default clashes
        st.session_state.setdefault(key, value)
    sb = st.sidebar
    sb.header("Configuration")
    provider = sb.selectbox("Provider", names, format_func=provider_display, key="cfg_provider")
    ready = readiness(provider)
    if not ready:
        sb.warning(f"{provider_display(provider)} is not configured: {ready.hint}", icon="⚠️")
    info = provider_info(provider)
    if info["error"]:
        sb.warning(escape_markdown(info["error"]), icon="⚠️")
    if info["models"]:
        model = sb.selectbox("Model", info["models"], key=f"cfg_model_{provider}", format_func=display_text)
    else:
        default = provider_caps(provider)["model_label"]
        model = _model(sb, provider, sb.text_input("Model (optional)", key=f"cfg_model_{provider}",
                                                   placeholder=f"default: {default}" if default else "").strip())
    retriever = sb.selectbox("Retriever", rnames, key="cfg_retriever")
    modes = modes_for(provider)
    if st.session_state.get("cfg_mode") not in modes:
        st.session_state["cfg_mode"] = modes[0]
    mode = sb.radio("Mode", modes, horizontal=True, key="cfg_mode",
                    help="agent: tool calling with markdown links · excerpts: numbered excerpts cited as [n]")
    protocol = protocol_picker(sb, provider, f"cfg_protocol_{provider}") if mode == "agent" else None
    note = declared(provider, "agent_mode_note")
    if mode == "agent" and note and not model:
        sb.warning(escape_markdown(note), icon="⚠️")
    k = sb.slider("k (results per search / excerpts)", 1, 20, key="cfg_k")
    corpus, corpus_label = _corpus_picker(sb)
    options = option_inputs(sb, provider)
    context = _context_policy(sb)
    store, db = trace_store(sb)
    return RunConfig(provider=provider, model=model, retriever=retriever, mode=mode, k=int(k), corpus=corpus,
                     corpus_label=corpus_label, options=options, db=db, store=store, tool_protocol=protocol,
                     user_id=viewer.user_id, owner=viewer.owner, context=context)


def _context_policy(sb) -> ContextPolicy:
    """The conversation's context policy (docs/design.md §11), as `ask --context-turns` sets it, and the history's
    token budget (0: derived from the model's context); within the bounds `ContextPolicy` holds."""
    with sb.expander("Conversation context"):
        turns = st.number_input("Earlier turns kept whole (with their tool results)", min_value=0,
                                max_value=MAX_CONTEXT_TURNS, value=DEFAULT_CONTEXT_TURNS, step=1, key="cfg_context_turns",
                                help="Older turns keep only their question and answer, as on the command line")
        budget = st.number_input("History token budget (0: half the model's context)", min_value=0,
                                 max_value=MAX_CONTEXT_TOKENS, value=0, step=1000, key="cfg_context_budget",
                                 help="Within it the oldest turns are dropped first")
    return ContextPolicy(turns=int(turns), token_budget=int(budget) or None)


def _allowed(container, check: Callable[[], Any], instead: str) -> Any:
    """`check()`, the confinement of something a visitor typed (docs/security.md); when it refuses, None,
    with the refusal and what is used `instead` shown."""
    try:
        return check()
    except PathNotAllowedError as exc:
        container.error(escape_markdown(f"{exc}. {instead}"))
        return None


STORE_PARAM = "store"  # ?store=NAME: the trace store a page (and a link to it) opens, by its name
#: How much of a refused `?store=` value the refusal quotes (the value comes from the address bar).
SHOWN_STORE_CHARS = 80


def _checked(stores: dict[str, Path | str]) -> dict[str, Path | str]:
    """`stores`, each name that is not a path a team store's without a password (`lake.check_name`); else the
    operator's error, naming the store (never printing the name's password)."""
    for name, where in stores.items():
        if isinstance(where, Path):
            continue
        if not is_team_store(where):
            raise PathNotAllowedError(f"{STORES_ENV}: the store {name!r} is neither a file path nor a team store "
                                      "(ducklake:postgres:<libpq connection string>)")
        try:
            check_name(where)
        except WorkbenchError as exc:
            raise PathNotAllowedError(f"{STORES_ENV}: the store {name!r}: {exc}") from None
    return stores


def _stores() -> dict[str, Path | str]:
    """The operator's trace stores (`paths.trace_stores`); only the default one, with the operator's error on the
    page, when `$WORKBENCH_STORES` is malformed."""
    try:
        return _checked(trace_stores())
    except PathNotAllowedError as exc:
        st.error(escape_markdown(f"{exc}. Only the default trace store is offered."), icon="🚫")
        return {DEFAULT_STORE: Path(default_db())}


def _follow_store_param(stores: dict[str, Path]) -> None:
    """`?store=NAME` (a link, a new tab) chooses that store; a name the operator does not offer is refused on the
    page itself (not in the sidebar), and the store in use stays."""
    wanted = st.query_params.get(STORE_PARAM)
    if not wanted or wanted == st.session_state.get("cfg_store"):
        return
    if wanted in stores:
        st.session_state["cfg_store"] = wanted
        return
    shown = wanted if len(wanted) <= SHOWN_STORE_CHARS else wanted[:SHOWN_STORE_CHARS] + "…"
    st.error(escape_markdown(f"There is no trace store named {display_text(shown)!r} in this app: it opens only the "
                             f"stores its operator lists ({', '.join(stores)}), by name, never a path. Showing "
                             f"{st.session_state.get('cfg_store', DEFAULT_STORE)!r}."), icon="🚫")


def trace_store(sb) -> tuple[str, str | None]:
    """The trace store picked in the sidebar among the operator's (`paths.trace_stores`), by name: (its name, its
    path; None for the default). The address names it (`?store=NAME`), so a link opens the same store."""
    stores = _stores()
    _follow_store_param(stores)
    if st.session_state.get("cfg_store") not in stores:
        st.session_state["cfg_store"] = DEFAULT_STORE
    name = sb.selectbox("Trace store", list(stores), key="cfg_store", format_func=display_text,
                        help="The trace databases this app's operator offers (`default` and `$WORKBENCH_STORES`, "
                             "docs/security.md); a link to a page names the store it opens.")
    if name == DEFAULT_STORE and STORE_PARAM not in st.query_params:
        return name, None
    st.query_params[STORE_PARAM] = name
    return name, (None if name == DEFAULT_STORE else str(stores[name]))


def _model(sb, provider: str, text: str) -> str | None:
    """A typed model; for a provider whose model is a file (`model_is_path`), only one inside the allowed
    roots or the provider's own default, else None (the default model)."""
    if not text or not declared(provider, "model_is_path"):
        return text or None
    default = provider_caps(provider)["model"]
    return _allowed(sb, lambda: str(confine(text, "model file", also=(Path(default),) if default else ())),
                    "Using the default model.")


def _my_uploads() -> Path:
    """This viewer's uploads folder (`identity.Viewer.uploads_token`: the signed-in person's, else this
    browser's), referenced by nothing else (no other viewer can type it: `paths.confine` refuses the uploads
    folder)."""
    return session_uploads(identity.current().uploads_token)


def _corpus_picker(sb) -> tuple[str, str]:
    source = sb.radio("Corpus", CORPUS_SOURCES, key="cfg_corpus_source")
    if source == "Folder or JSONL path":
        path = sb.text_input("Corpus path", key="cfg_corpus_path", placeholder="/path/to/folder or corpus.jsonl")
        if path.strip():
            try:
                p = confine(path, "corpus path")
            except PathNotAllowedError as exc:
                sb.error(escape_markdown(str(exc)))
            else:
                if p.exists():
                    return str(p), p.name
                sb.error(escape_markdown(f"{path.strip()} does not exist; give a folder of Markdown files or a .jsonl file"))
    elif source == "Upload":
        up = sb.file_uploader("Corpus file", type=["jsonl", "zip", *(x.lstrip(".") for x in FOLDER_SUFFIXES)], key="corpus_upload")
        if up is not None:
            try:
                return str(save_upload(up.name, up.getvalue(), _my_uploads())), up.name
            except WorkbenchError as exc:
                sb.error(escape_markdown(str(exc)))
    return str(DEMO_CORPUS), "demo"
