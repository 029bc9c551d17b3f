"""Frozen records shared by every layer (docs/design.md §1–§4).

These are the explicit values provenance is computed from: tools return `ToolCall`s, the agent
loop returns a `TurnRecord`. Nothing is recovered from event handlers.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields, replace
from collections.abc import Mapping
from typing import Any, Literal, get_args

from . import schemas
from .config import DEFAULT_CONTEXT_TURNS, DEFAULT_MODE, MAX_CONTEXT_TOKENS, MAX_CONTEXT_TURNS
from .errors import TurnConfigError, TurnRecordError, WorkbenchError

Exposure = Literal["full", "snippet", "title"]
Mode = Literal["agent", "excerpts"]
#: How much of an earlier turn a conversation's model still had (docs/design.md §11): `full` (question,
#: answer and tool results), `answer` (question and answer only), `dropped` (nothing).
ContextState = Literal["full", "answer", "dropped"]
CONTEXT_STATES: tuple[str, ...] = get_args(ContextState)
#: The two ways of asking (docs/design.md §3), in the order pickers offer them; stated once, as `Mode`.
MODES: tuple[str, ...] = get_args(Mode)

#: Strongest first: a document's exposure in a turn is the maximum over every tool call.
EXPOSURE_RANK: dict[str, int] = {"full": 3, "snippet": 2, "title": 1}


def artifact_label(kind: str, artifact_kind: str | None) -> str:
    """The label shown beside every document: "Source text", "Generated <kind>" or "Generated retrieval aid"."""
    if kind != "generated":
        return "Source text"
    return f"Generated {artifact_kind}" if artifact_kind else "Generated retrieval aid"


@dataclass(frozen=True)
class Document:
    doc_id: str
    title: str
    text: str
    url: str | None = None
    category: str = ""
    section: str | None = None
    kind: str = "source"  # "source" | "generated"
    artifact_kind: str | None = None
    derived_from: tuple[str, ...] = ()
    path: str | None = None  # file the document came from (file name in citation records)
    pages: tuple[str, ...] | None = None  # per-page text for paged formats (PDF)

    @property
    def label(self) -> str:
        return artifact_label(self.kind, self.artifact_kind)

    @property
    def file_name(self) -> str | None:
        return file_name_of(self.path)


def file_name_of(path: str | None) -> str | None:
    """A path's file name, whichever separator it was written with (`a\\b/c.pdf` -> `c.pdf`); None for none."""
    return path.replace("\\", "/").rsplit("/", 1)[-1] if path else None


@dataclass(frozen=True)
class Chunk:
    doc_id: str
    chunk_index: int
    text: str
    page: int | None = None
    chunk_type: str = "source"  # "source" | "generated", from the document's kind
    artifact_kind: str | None = None


@dataclass(frozen=True)
class Hit:
    """One retrieved chunk with its rank (1-based) and retriever score."""

    chunk: Chunk
    score: float
    rank: int


@dataclass(frozen=True)
class ResultItem:
    """One document a tool exposed to the model (docs/design.md §4 `results[]`)."""

    doc_id: str
    title: str = ""
    url: str | None = None
    kind: str = "source"
    artifact_kind: str | None = None
    rank: int | None = None
    score: float | None = None
    chunk_index: int | None = None
    page: int | None = None
    snippet: str | None = None
    #: The exposure measured for this result when it differs by result (an audited call, docs/design.md §12);
    #: None: the call's. Out of `repr` (content-derived turn ids stay what they were) and absent from the JSON
    #: when None.
    exposure: Exposure | None = field(default=None, repr=False)


#: The status of a turn whose answer was cut off at the model's output token limit (docs/providers.md, "Faults"):
#: the answer is kept and its sets computed, but it is no doc gap and fails an experiment's status assertion.
TRUNCATED = "truncated"
#: The status of a turn audited from another app's spans whose inputs are hidden, missing or cut (docs/design.md
#: §12): it claims nothing, so provenance judges none of its citations (no set, no rejection).
UNAUDITABLE = "unauditable"
#: The statuses of a turn with an answer to judge, verify and compare (a truncated one is an answer, though cut).
ANSWERED: tuple[str, ...] = ("ok", TRUNCATED)


@dataclass(frozen=True)
class Cut:
    """What a tool result left out so that it fits the model's context (docs/design.md, "Results that fit").

    `kind` is `page` (a listing: `list_articles`, `browse_section`, `search`) or `part` (a document read by
    `fetch_document`). `page` of `pages` is the page or part the model received. `total` counts the whole listing's
    items (a document's characters) and `[start, end)` is the range of them in this result: items by rank from 0,
    or characters of the document's text. `size` is the page size the turn worked with (tokens a page or part may
    fill), so the same call gives the same result again (a conversation's carried tool calls run again). `reason`
    says in words what was cut and why."""

    kind: Literal["page", "part"]
    page: int
    pages: int
    total: int
    start: int
    end: int
    size: int
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ToolCall:
    """What one tool call exposed: its exposure and every document it returned.

    `exposure` is the tool's declared exposure, except for a document read only in part (`cut.kind == "part"`,
    fewer than all its parts): `snippet`. `cut` is None when the result is whole."""

    name: str
    exposure: Exposure
    args: dict[str, Any] = field(default_factory=dict)
    results: tuple[ResultItem, ...] = ()
    error: str | None = None
    latency_ms: float | None = None
    call_id: str | None = None
    #: Not among the content fields a record's id is derived from (`turn_ids`): what was cut differs in `results` too.
    cut: Cut | None = None


@dataclass(frozen=True)
class Excerpt:
    """One numbered excerpt `[n]` handed to the model in excerpt mode (docs/design.md §3)."""

    n: int
    doc_id: str | None  # None: a numbered block of an audited prompt that shows no document (a `[n]` of it is rejected)
    chunk_index: int | None = None
    page: int | None = None
    score: float | None = None
    text: str = ""
    chunk_type: str = "source"
    artifact_kind: str | None = None
    title: str = ""
    url: str | None = None
    file_name: str | None = None


@dataclass(frozen=True)
class ModelCall:
    """One call to a provider: who answered, how long it took, what it cost."""

    provider: str
    model: str | None = None
    latency_ms: float | None = None
    tokens_in: int | None = None
    tokens_out: int | None = None
    finish_reason: str | None = None
    model_version: str | None = None  # what the server says answered, e.g. "gemini-2.5-flash-001"
    retries: int = 0  # rate-limit / server-error retries before this call succeeded (or gave up)
    n_tool_calls: int = 0  # tool calls this step asked for; the agent loop runs them right after the call


@dataclass(frozen=True)
class HistoryTurn:
    """One earlier turn of a conversation as turn t's context held it (docs/design.md §11), oldest first: its
    `record` as it was asked, wrapped (as llama-index's `NodeWithScore` wraps a node) with what only the
    conversation knows, its `context` state and its 1-based `position`.

    The record stays whole whatever its `context` state: provenance needs its tool calls and excerpts to know
    which of its links were accepted and which exposures the context policy dropped (`not_in_context`)."""

    record: TurnRecord
    context: ContextState
    position: int | None = None

    @property
    def steps(self) -> tuple[int, ...]:
        """How many of its tool calls each of its model steps asked for, in order (its model calls'
        `n_tool_calls`, answer step excluded), so its tool calls go back to the model step by step as they
        happened; empty (e.g. a record written by hand): one tool call per step."""
        return tuple(c.n_tool_calls for c in self.record.model_calls if c.n_tool_calls)

    @property
    def prior_context(self) -> tuple[tuple[str, ContextState], ...]:
        """The context this turn itself was asked with: (turn id, context state) of each earlier turn its own
        record's `history` had. Provenance reads which of its links were *accepted* against the allow-list it
        really had (docs/design.md §11); empty: not known, the states of the later record are used."""
        return tuple((h.record.turn_id, h.context) for h in self.record.history if h.record.turn_id)

    def to_dict(self) -> dict[str, Any]:
        """The history entry of a turn record's JSON (docs/design.md §4, `turn-record.schema.json`)."""
        r = self.record
        return {"question": r.question, "answer": r.answer, "context": self.context, "turn_id": r.turn_id,
                "position": self.position, "mode": r.mode, "tool_calls": tuple(tool_call_dict(c) for c in r.tool_calls),
                "excerpts": tuple(asdict(e) for e in r.excerpts), "steps": self.steps,
                "prior_context": self.prior_context}


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class ContextPolicy:
    """What of the earlier turns stays in the model's context (docs/design.md §11), recorded with every turn.

    The latest `turns` earlier turns keep their tool results (`full`); older ones keep question and answer
    (`answer`). Within `token_budget` (estimated tokens of the history; None: derived from the model's
    context) the oldest turns are dropped first (`answer`, then `dropped`).

    Bounded here, where every caller (CLI, app, library) builds one: `turns` is a whole number from 0 to
    `config.MAX_CONTEXT_TURNS`, `token_budget` None or 1 to `config.MAX_CONTEXT_TOKENS` (docs/security.md);
    anything else raises `WorkbenchError` naming the range."""

    turns: int = DEFAULT_CONTEXT_TURNS
    token_budget: int | None = None

    def __post_init__(self):
        if not _whole(self.turns) or not 0 <= self.turns <= MAX_CONTEXT_TURNS:
            raise WorkbenchError(f"context turns must be a whole number from 0 to {MAX_CONTEXT_TURNS}, "
                                 f"not {self.turns!r}")
        if self.token_budget is not None and (not _whole(self.token_budget)
                                              or not 1 <= self.token_budget <= MAX_CONTEXT_TOKENS):
            raise WorkbenchError(f"a context token budget must be a whole number from 1 to {MAX_CONTEXT_TOKENS:,} "
                                 f"(or none: derived from the model's context), not {self.token_budget!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True, slots=True)
class TurnConfig(Mapping):
    """The configuration a turn ran with (`TurnRecord.config`, the payload's `config`): what the agent loop records,
    what the session adds, what a verification re-run and an audited turn say (docs/design.md §2, §4, §9, §12).
    The one typed shape of it; read like the JSON object it is written as (`config["k"]`, `config.get("k")`).

    A key is in the JSON when the producer gave it, null or not, in the order it gave them (`present`: the
    fields given, in order; by default the ones that are not None, in this declaration order, which is the
    order the agent loop, the session, a re-run and an audit write them in). A key it does not know is refused
    (`from_json`, `TurnConfigError` naming it), as llm's `Options(extra="forbid")` would: when a turn record is
    built or parsed, not later when its payload is."""

    provider: str | None = None
    model: str | None = None
    retriever: str | None = None
    mode: str | None = None
    tool_protocol: str | None = None
    k: int | None = None
    prompt_version: str | None = None
    corpus_id: str | None = None
    corpus_hash: str | None = None
    provider_label: str | None = None
    model_label: str | None = None
    options: Mapping[str, Any] | None = None  # the provider options recorded (`providers.options.recorded`)
    context_window: Mapping[str, Any] | None = None  # {"tokens", "source"[, "output_tokens"]} (`agent._Budget`)
    context: Mapping[str, Any] | None = None  # a conversation's policy and budget (`agent._fit`)
    verifies: str | None = None  # a verification re-run: the turn it verifies and the documents it withheld
    withheld: tuple[str, ...] | None = None
    app: str | None = None  # an audited turn: the app's service, the spans' source and run
    source: str | None = None
    run: str | None = None
    present: tuple[str, ...] = field(default=(), compare=False, repr=False)

    def __post_init__(self):
        if not self.present:
            object.__setattr__(self, "present", tuple(n for n in _CONFIG_KEYS if getattr(self, n) is not None))

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> TurnConfig:
        unknown = [k for k in d if k not in _CONFIG_KEYS]
        if unknown:
            raise TurnConfigError(f"a turn's configuration has no key {', '.join(map(repr, unknown))} "
                                  f"(it has {', '.join(_CONFIG_KEYS)})")
        values = {k: tuple(v) if k == "withheld" and v is not None else v for k, v in d.items()}
        return cls(**values, present=tuple(d))

    @classmethod
    def of(cls, value: Mapping[str, Any] | None) -> TurnConfig:
        """`value` as a `TurnConfig`: itself, or a mapping's keys checked (`from_json`)."""
        return value if isinstance(value, TurnConfig) else cls.from_json(value or {})

    def option_pairs(self) -> tuple[tuple[str, Any], ...]:
        """The provider options as (name, value) pairs in name order, lists as tuples: hashable, as the app keeps
        a configuration (`ui.records.RunConfig.options`)."""
        return tuple((name, tuple(v) if isinstance(v, list) else v) for name, v in sorted((self.options or {}).items()))

    def __getitem__(self, key: str) -> Any:
        if key not in self.present:
            raise KeyError(key)
        return getattr(self, key)

    def __iter__(self):
        return iter(self.present)

    def __len__(self) -> int:
        return len(self.present)

    def to_json(self) -> dict[str, Any]:
        out = {n: getattr(self, n) for n in self.present}
        for n in ("options", "context_window", "context"):
            if out.get(n) is not None:
                out[n] = dict(out[n])
        if out.get("withheld") is not None:
            out["withheld"] = list(out["withheld"])
        return out


_CONFIG_KEYS = tuple(f.name for f in fields(TurnConfig) if f.name != "present")


@dataclass(frozen=True)
class TurnRecord:
    """Everything one turn did (docs/design.md §4); the input of provenance and what gets traced."""

    question: str
    answer: str
    mode: Mode = DEFAULT_MODE
    tool_calls: tuple[ToolCall, ...] = ()
    excerpts: tuple[Excerpt, ...] = ()
    turn_id: str | None = None
    status: str = "ok"  # "ok", `TRUNCATED` (an answer cut at the token limit) or an error status ("step_limit", …)
    error: str | None = None
    model_calls: tuple[ModelCall, ...] = ()
    #: What it was asked with; a mapping given here is checked (an unknown key raises `TurnConfigError`).
    config: TurnConfig = field(default_factory=TurnConfig)
    started_at: str | None = None
    latency_ms: float | None = None
    #: docs/design.md §11: the earlier turns of its conversation, oldest first (empty: a single turn).
    history: tuple[HistoryTurn, ...] = ()
    conversation_id: str | None = None
    position: int | None = None  # 1-based place in its conversation
    #: Who asked it (the signed-in person's email, else subject) and whose it is (`turns.owner`, m018); None
    #: outside the app and without sign-in (docs/security.md, "Who sees what"). Not among the content fields a
    #: record without a turn id is named by (`turn_ids`): who asked is no content of the turn.
    user_id: str | None = None
    owner: str | None = None

    def __post_init__(self):
        if not isinstance(self.config, TurnConfig):
            object.__setattr__(self, "config", TurnConfig.of(self.config))

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON data; a single turn has no conversation fields (absent, not null)."""
        out = asdict(replace(self, history=(), config=TurnConfig()))  # each earlier turn as its history entry
        out["config"] = self.config.to_json()
        out["tool_calls"] = tuple(tool_call_dict(c) for c in self.tool_calls)
        if self.history:
            out["history"] = tuple(h.to_dict() for h in self.history)
        else:
            del out["history"]
        for key in ("conversation_id", "position", "user_id", "owner"):
            if out[key] is None:
                del out[key]
        return out


def tool_call_dict(call: ToolCall) -> dict[str, Any]:
    """A tool call as JSON data; a result's `exposure` only where it has its own."""
    out = asdict(call)
    for r in out["results"]:
        if r["exposure"] is None:
            del r["exposure"]
    return out


def turn_record_from_dict(data: dict[str, Any]) -> TurnRecord:
    """Parse a docs/design.md §4 turn record (extra fields ignored); raises `TurnRecordError` naming each problem.

    Checked in order: the JSON Schema shipped in `workbench/schemas/` (types, enums such as `kind` and
    `exposure`, excerpt `n` >= 1); what a schema cannot say — an excerpt number is a whole number written
    as one (JSON Schema counts 2.0 as an integer) and no two excerpts of the conversation (this turn's and
    its `history`'s, docs/design.md §11) share one, since `[n]` must name exactly one excerpt; then the model
    itself in strict mode (no "1" -> 1 or true -> 1 coercion). Each `history` entry becomes a `HistoryTurn`.
    """

    from pydantic import ValidationError

    try:  # tuples to lists (a TurnRecord.to_dict() is accepted too), and only JSON text
        data = json.loads(json.dumps(data))
        json.dumps(data, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise TurnRecordError(f"not a valid turn record: contains an unpaired surrogate escape ({exc.object[exc.start]!r}); "
                              "write the character itself") from None
    except (TypeError, ValueError) as exc:
        raise TurnRecordError(f"not a valid turn record: not JSON data ({exc})") from None
    if not isinstance(data, dict):
        raise TurnRecordError("not a valid turn record: a turn record is a JSON object")
    found = schemas.validator(schemas.TURN_RECORD).iter_errors(data)
    problems = [f"{_where(e.absolute_path)}: {_short(e.message)}"
                for e in sorted(found, key=lambda e: [str(p) for p in e.absolute_path])]
    if not problems:
        problems = _excerpt_number_problems(
            [(f"history.{i}.excerpts", h.get("excerpts") or []) for i, h in enumerate(data.get("history") or [])]
            + [("excerpts", data.get("excerpts") or [])])
    config = None
    if not problems:
        try:
            config = TurnConfig.of(data.get("config"))
        except TurnConfigError as exc:  # refused here, when parsed: not later, when its payload is built
            problems = [f"config: {exc}"]
    if not problems:
        try:
            record = _turn_adapter().validate_json(json.dumps(_wrapped({k: v for k, v in data.items() if k != "config"})),
                                                   strict=True)
            return replace(record, config=config)
        except ValidationError as exc:
            problems = [f"{_where(_unwrapped(e['loc']))}: {e['msg']}" for e in exc.errors()]
    raise TurnRecordError("not a valid turn record: " + "; ".join(problems[:5]))


def _wrapped(data: dict[str, Any]) -> dict[str, Any]:
    """`data` with each `history` entry in `HistoryTurn`'s shape: its record (question, answer, mode, tool calls,
    excerpts, turn id; its `steps` as model calls known only by the tool calls they asked for; its `prior_context`
    as a history of turns known only by id and state), its context state and position."""
    if not data.get("history"):
        return data

    def entry(h: dict[str, Any]) -> dict[str, Any]:
        record = {k: h[k] for k in ("question", "answer", "mode", "tool_calls", "excerpts", "turn_id") if k in h}
        record["model_calls"] = [{"provider": "", "n_tool_calls": n} for n in h.get("steps") or ()]
        record["history"] = [{"record": {"question": "", "answer": "", "turn_id": turn_id}, "context": state}
                             for turn_id, state in h.get("prior_context") or ()]
        return {"record": record, "context": h["context"], "position": h.get("position")}

    return {**data, "history": [entry(h) for h in data["history"]]}


def _unwrapped(loc: tuple) -> tuple:
    """A place in `_wrapped(data)` as the place in `data` it came from (`history.0.record.answer` → `history.0.answer`)."""
    return loc[:2] + loc[3:] if loc[:1] == ("history",) and loc[2:3] == ("record",) else loc


def _where(path) -> str:
    return ".".join(str(p) for p in path) or "(root)"


def _short(message: str, limit: int = 200) -> str:
    return message if len(message) <= limit else message[: limit - 1] + "…"


def _excerpt_number_problems(groups: list[tuple[str, list[Any]]]) -> list[str]:
    """Excerpt numbers that are not whole numbers, or that two excerpts of the conversation share (`groups`:
    where each turn's excerpts are, oldest first, and the excerpts)."""
    problems, first = [], {}
    for where, excerpts in groups:
        for i, e in enumerate(excerpts):
            n = e.get("n")
            if type(n) is not int:  # 2.0 passes the schema's "integer"
                problems.append(f"{where}.{i}.n: {_short(repr(n))} is not a whole number (write it without a decimal point)")
            elif n in first:
                problems.append(f"{where}.{i}.n: duplicate excerpt number {n} (also {first[n]}.n); "
                                "each [n] must name exactly one excerpt in the conversation")
            else:
                first[n] = f"{where}.{i}"
    return problems


_ADAPTER = None


def _turn_adapter():
    global _ADAPTER
    if _ADAPTER is None:
        from pydantic import TypeAdapter

        _ADAPTER = TypeAdapter(TurnRecord)
    return _ADAPTER
