"""Migration m020: audited assistants (docs/design.md §12) in the trace store.

`audit_spans` keeps every span `workbench collect` or `workbench ingest` received, as received (bounded), keyed
by trace and span id, so a span an exporter sends twice is stored once; `turn_payloads` keeps each turn's sources
payload as JSON (audited turns carry the `audit` object there), which `workbench turns --json` prints. Like every
migration, frozen once released: change the schema by appending a new one (a new `schema_mNNN.py`, registered by `@migration`).
"""

from .migration import migration

M020_AUDIT = r"""
CREATE TABLE audit_spans (
    span_key VARCHAR PRIMARY KEY,
    trace_id VARCHAR NOT NULL,
    span_id VARCHAR NOT NULL,
    parent_id VARCHAR,
    run_id VARCHAR,
    name VARCHAR NOT NULL,
    kind VARCHAR,
    service VARCHAR,
    started_at TIMESTAMPTZ,
    span_json VARCHAR NOT NULL
);
COMMENT ON TABLE audit_spans IS 'One row per OpenInference span received by `workbench collect` or `workbench ingest` (docs/design.md §12), as received; a span sent twice is kept once.';
COMMENT ON COLUMN audit_spans.span_key IS '`<trace_id>:<span_id>`: what makes a span the same span when an exporter retries.';
COMMENT ON COLUMN audit_spans.trace_id IS 'OTLP trace id (32 hex digits); an audited turn''s `turns.turn_id` is `otel-<trace_id>`.';
COMMENT ON COLUMN audit_spans.span_id IS 'OTLP span id (16 hex digits).';
COMMENT ON COLUMN audit_spans.parent_id IS 'Parent span id; NULL for a trace''s root span.';
COMMENT ON COLUMN audit_spans.run_id IS 'The audit run (`runs.run_id`) that received it: one run per `collect` or `ingest`.';
COMMENT ON COLUMN audit_spans.name IS 'Span name as the instrumentor wrote it, e.g. `VectorIndexRetriever.retrieve`, `ChatCompletion`.';
COMMENT ON COLUMN audit_spans.kind IS 'OpenInference span kind: `LLM`, `RETRIEVER`, `RERANKER`, `TOOL`, `CHAIN`, `EMBEDDING`, …; NULL when the span has none.';
COMMENT ON COLUMN audit_spans.service IS 'The audited app: its resource `service.name`.';
COMMENT ON COLUMN audit_spans.started_at IS 'When the span started (UTC).';
COMMENT ON COLUMN audit_spans.span_json IS 'The span as JSON: ids, name, times, flattened attributes (a string attribute over the size bound replaced by a marker and listed in `cut`), dropped attribute count, status.';

CREATE TABLE turn_payloads (
    turn_id VARCHAR PRIMARY KEY,
    payload_json VARCHAR NOT NULL
);
COMMENT ON TABLE turn_payloads IS 'Each turn''s sources payload (docs/design.md §2) as JSON, written with the turn (turns written before m020 have none); an audited turn''s holds its `audit` object.';
COMMENT ON COLUMN turn_payloads.turn_id IS 'The turn; joins `turns`.';
COMMENT ON COLUMN turn_payloads.payload_json IS 'The payload as `workbench ask --json` prints it (secrets redacted as everywhere).';
"""


@migration(M020_AUDIT)
def m020_audit(con) -> None:
    """SQL only."""
