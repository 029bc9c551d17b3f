"""The spans of an Arize Phoenix project, read with Phoenix's own client (`arize-phoenix-client`), as the `Span`
records the rest of the audit reads (docs/design.md §12, docs/audit.md).

Phoenix answers with a span's attributes flattened (`llm.input_messages.0.message.role`), as OTLP carries them,
except what it parses when it stores a span: a JSON-string attribute (`metadata`, `tool.parameters`,
`llm.prompt_template.variables`, `….document.metadata`) comes back as one key per leaf
(`retrieval.documents.0.document.metadata.url`), and is put back together here as the JSON string the app sent.
The span kind, which Phoenix keeps apart, becomes `openinference.span.kind` again. Phoenix keeps neither the
span's resource (so no `service.name`: the project's name stands for the app) nor a span's count of dropped
attributes (so a span attribute limit cannot be told from Phoenix).

Bounds (docs/security.md): a project is read whole, up to `MAX_PHOENIX_SPANS` spans; one holding more is refused
before anything is written. String attributes are bounded as the receiver's are (`spans.MAX_ATTRIBUTE_CHARS`).
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Any, Iterator, Mapping

import httpx
from phoenix.client import Client
from phoenix.client.exceptions import PhoenixException

from ..errors import WorkbenchError
from .spans import Span, SpanFormatError, bounded

#: The most spans read from one project (they are all held in memory, then assembled oldest trace first).
MAX_PHOENIX_SPANS = 100_000
#: The attributes Phoenix parses as JSON when it stores a span (every key ending so), as its server does.
JSON_STRING_ATTRIBUTES = ("document.metadata", "llm.prompt_template.variables", "metadata", "tool.parameters")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_STATUS = {"OK": "ok", "ERROR": "error", "UNSET": "unset"}


class PhoenixError(WorkbenchError):
    """Phoenix cannot be read: unreachable, not a Phoenix server, no such project, or over the bound."""


def project_spans(url: str, project: str, *, limit: int | None = None) -> list[Span]:
    """Every span of `project` on the Phoenix server at `url`, at most `limit` (default `MAX_PHOENIX_SPANS`):
    all of them, or an error, never a part."""
    limit = MAX_PHOENIX_SPANS if limit is None else limit
    with _reading(url):
        client = Client(base_url=url)
        project_id = _project_id(client, url, project)
        records = client.spans.get_spans(project_identifier=project_id, limit=limit + 1)
    if not isinstance(records, list):
        raise PhoenixError(f"{url} does not answer as a Phoenix server (its spans are no list)")
    if len(records) > limit:
        raise PhoenixError(f"Phoenix project {project!r} holds more than {limit} spans, the most one ingest reads "
                           "(docs/security.md); nothing was written")
    return [span_of(r, service=project) for r in records]


@contextmanager
def _reading(url: str) -> Iterator[None]:
    """What the client raises, as one clear `PhoenixError` naming the server."""
    try:
        yield
    except httpx.HTTPStatusError as exc:
        status = exc.response.status_code
        if status in (401, 403):
            raise PhoenixError(f"Phoenix at {url} refused access (HTTP {status}): set PHOENIX_API_KEY to a key "
                               "it accepts") from None
        path = exc.request.url.path
        raise PhoenixError(f"{url} does not answer as a Phoenix server (GET {path}: HTTP {status})") from None
    except (httpx.TransportError, httpx.InvalidURL) as exc:
        raise PhoenixError(f"cannot reach Phoenix at {url}: {exc or type(exc).__name__}") from None
    except (PhoenixException, ValueError, KeyError, TypeError) as exc:  # ValueError: a body that is no JSON
        raise PhoenixError(f"{url} does not answer as a Phoenix server ({type(exc).__name__}: {exc})"[:500]) from None


def _project_id(client: Client, url: str, project: str) -> str:
    """The id of the project named `project` (exactly), or a `PhoenixError` naming the near ones."""
    found = client.projects.list(name_contains=project)
    if not isinstance(found, list) or not all(isinstance(p, dict) and "name" in p and "id" in p for p in found):
        raise PhoenixError(f"{url} does not answer as a Phoenix server (its projects are no list of projects)")
    for p in found:
        if p["name"] == project:
            return str(p["id"])
    near = sorted(str(p["name"]) for p in found)[:10]
    hint = f" (projects whose names contain it: {', '.join(repr(n) for n in near)})" if near else ""
    raise PhoenixError(f"Phoenix at {url} has no project {project!r}{hint}")


def span_of(record: Mapping[str, Any], *, service: str | None) -> Span:
    """One span of Phoenix's `GET /v1/projects/{id}/spans` as the audit's `Span` (ids as hex, attributes flat)."""
    try:
        context = record["context"]
        trace_id, span_id = str(context["trace_id"]).lower(), str(context["span_id"]).lower()
        parent = record.get("parent_id")
        name, start, end = str(record["name"]), _ns(record["start_time"]), _ns(record["end_time"])
        attributes = dict(record.get("attributes") or {})
    except (KeyError, TypeError, ValueError) as exc:
        raise SpanFormatError(f"a Phoenix span is not readable ({type(exc).__name__}: {exc})"[:300]) from None
    for value, size, what in ((trace_id, 16, "trace_id"), (span_id, 8, "span_id")):
        if not _is_id(value, size):
            raise SpanFormatError(f"Phoenix span {name[:80]!r} has no valid {what} ({value[:40]!r})")
    kind = record.get("span_kind")
    attributes = {**({"openinference.span.kind": kind} if isinstance(kind, str) else {}), **rejoined(attributes)}
    attributes, cut = bounded(attributes)
    parent = str(parent).lower() if parent and _is_id(str(parent).lower(), 8) else None
    return Span(trace_id=trace_id, span_id=span_id, parent_id=parent, name=name, start_ns=start, end_ns=end,
                attributes=attributes, service=service, cut=cut,
                status=_STATUS.get(str(record.get("status_code") or "UNSET").upper(), "unset"))


def _is_id(value: str, size: int) -> bool:
    try:
        raw = bytes.fromhex(value)
    except ValueError:
        return False
    return len(raw) == size and any(raw)


def _ns(iso: Any) -> int:
    """An ISO 8601 time (Phoenix keeps microseconds; a time without a zone is UTC) as Unix nanoseconds."""
    t = datetime.fromisoformat(str(iso))
    t = t if t.tzinfo else t.replace(tzinfo=timezone.utc)
    return (t - _EPOCH) // timedelta(microseconds=1) * 1000


def json_root(key: str) -> str | None:
    """The JSON-string attribute `key` is (or is a leaf of, as Phoenix flattens it), or None."""
    parts = key.split(".")
    for i in range(1, len(parts) + 1):
        prefix = ".".join(parts[:i])
        if prefix.endswith(JSON_STRING_ATTRIBUTES):
            return prefix
    return None


def rejoined(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """`attributes` with each JSON-string attribute Phoenix parsed (and flattened into leaves) a JSON string
    again, where its first leaf was; a list of objects (leaves `….0.x`, `….1.x`) a list again."""
    out: dict[str, Any] = {}
    trees: dict[str, dict[str, Any]] = {}
    for key, value in attributes.items():
        root = json_root(key)
        if root is None:
            out[key] = value
        elif root == key:  # a value that is no object: a string Phoenix could not parse stays as it is
            out[key] = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        else:
            if root not in trees:
                out[root], trees[root] = None, {}
            node = trees[root]
            *path, leaf = key[len(root) + 1:].split(".")
            for part in path:
                node = node.setdefault(part, {})
                if not isinstance(node, dict):
                    break
            else:
                node[leaf] = value
    for root, tree in trees.items():
        out[root] = json.dumps(_lists(tree), ensure_ascii=False)
    return out


def _lists(value: Any) -> Any:
    """A dict keyed 0..n-1 (how Phoenix flattens a list of objects) as a list, all the way down."""
    if not isinstance(value, dict):
        return value
    items = {k: _lists(v) for k, v in value.items()}
    if items and all(k.isdigit() for k in items):
        by_index = {int(k): v for k, v in items.items()}
        if sorted(by_index) == list(range(len(items))):
            return [by_index[i] for i in range(len(items))]
    return items
