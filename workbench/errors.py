"""One exception class per failure, so callers (CLI, app) can handle each precisely."""

from __future__ import annotations

from typing import Any


class WorkbenchError(Exception):
    """Base class: a failure with a message written for the user (the CLI exits 2 on these)."""


class CorpusError(WorkbenchError):
    """A corpus file is missing, unreadable, empty or malformed; names the file and line."""

    def __init__(self, message: str, path: str | None = None, line: int | None = None):
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(f"{where}{message}")
        self.path = path
        self.line = line


class UnknownNameError(WorkbenchError):
    """An unknown provider, retriever, tool, judge or mode was requested."""

    def __init__(self, kind: str, name: str, known: list[str] | tuple[str, ...]):
        super().__init__(f"unknown {kind} {name!r}; choose one of: {', '.join(sorted(known))}")
        self.kind = kind
        self.name = name
        self.known = list(known)


class ToolError(WorkbenchError):
    """A tool was called with bad arguments; the agent sees the message, the turn goes on."""


class ProviderError(WorkbenchError):
    """A model provider failed (connection, auth, unknown model, rate limit…); ends the turn.

    `status` is the turn's status (`connection_error`, `auth_error`, …); `call` is the failed model
    call (a `types.ModelCall`: latency including backoff, retries), which the agent loop records with the
    turn, or None when the provider did not say. Typed `Any` here: `types` imports this module (no circle).
    """

    def __init__(self, message: str, status: str = "provider_error", call: Any = None):
        super().__init__(message)
        self.status = status
        self.call = call


class ProviderOptionError(WorkbenchError):
    """A provider option is unknown to that provider or has a bad value (checked against the provider's
    `options_schema`); names the provider, the option and what it takes."""


class CapabilityError(WorkbenchError):
    """A run asked a provider for something it does not declare (json-steps without JSON-schema output,
    native tool calling without tool support); names what to use instead."""


class TurnRecordError(WorkbenchError):
    """A turn record (docs/design.md §4) given to `provenance` is not valid."""


class PayloadError(WorkbenchError, ValueError):
    """A sources payload (docs/design.md §2) or a turn's configuration does not keep the contract: a key it does
    not know, or JSON the payload schema refuses; names the key or the place. A `ValueError` too, as it was."""


class TurnConfigError(PayloadError):
    """A turn's configuration (`types.TurnConfig`) has a key it does not know; names the key and the known ones."""


class EmbeddingError(WorkbenchError):
    """An embedding backend (Ollama, Gemini, wordllama) is not configured or failed; names the fix."""


class PluginError(WorkbenchError):
    """A plug-in (a WORKBENCH_PLUGINS module or a `workbench.providers` / `.retrievers` / `.judges` entry
    point) failed to load; names it."""


class TraceStoreError(WorkbenchError):
    """The trace database cannot be opened, stays locked, or a trace query failed; names the fix."""


class ConversationMoved(WorkbenchError):
    """A conversation turn asked as position `asked` found, when written, that another turn had taken that place
    (the conversation's last position is now `last`); raised instead of writing only when the caller asked so
    (`if_moved="raise"`: it asks the turn again with the new history). Never a `TraceStoreError`: the store is fine."""

    def __init__(self, conversation_id: str, asked: int, last: int):
        super().__init__(f"conversation {conversation_id!r} moved while the turn ran: it was asked as turn {asked}, "
                         f"and turn {last} is now the last one")
        self.conversation_id = conversation_id
        self.asked = asked
        self.last = last


class ReadOnlyQueryError(TraceStoreError):
    """`workbench sql` was given a statement that could write (DROP, INSERT, ATTACH, COPY …); it only reads."""


class JudgeInputError(WorkbenchError):
    """A `judge` input file line is not {"id", "claim", "evidence": [text, …]}; names the file and line."""


class VerificationError(WorkbenchError):
    """A turn cannot be verified by ablation (it failed, or the budget is below one re-run); names why."""


class PathNotAllowedError(WorkbenchError):
    """A path typed in the app lies outside the folders the operator allows (docs/security.md)."""
