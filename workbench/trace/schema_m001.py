"""Migration m001: the first tables: runs, turns, tool calls, retrieved items, citations and sources.

Like every migration, frozen once released: change the schema by appending a new one (a new
`schema_mNNN.py`, registered by `@migration`).
"""

from .migration import migration

SQL = """
CREATE TABLE runs (
    run_id VARCHAR PRIMARY KEY,
    created_at TIMESTAMPTZ NOT NULL,
    kind VARCHAR NOT NULL,
    provider VARCHAR,
    model VARCHAR,
    retriever VARCHAR,
    mode VARCHAR,
    k INTEGER,
    prompt_version VARCHAR,
    corpus_id VARCHAR,
    corpus_hash VARCHAR,
    config_json VARCHAR,
    run_key VARCHAR
);
COMMENT ON TABLE runs IS 'One row per run: a configuration under which turns were asked. Interactive asks reuse one run per configuration per process; `workbench eval` creates exactly one run per batch.';
COMMENT ON COLUMN runs.run_id IS 'Run identifier (uuid hex).';
COMMENT ON COLUMN runs.created_at IS 'When the run was created (UTC); exports are partitioned by its date.';
COMMENT ON COLUMN runs.kind IS '`interactive` (ask from the CLI, app or a notebook) or `eval` (a batch from `workbench eval`).';
COMMENT ON COLUMN runs.provider IS 'Chat provider name, e.g. `offline`, `ollama`, `gemini`.';
COMMENT ON COLUMN runs.model IS 'Model name as the provider reported it.';
COMMENT ON COLUMN runs.retriever IS 'Retriever name, e.g. `bm25`.';
COMMENT ON COLUMN runs.mode IS '`agent` (tool calling) or `excerpts` (single shot over numbered excerpts).';
COMMENT ON COLUMN runs.k IS 'Results per search, or number of excerpts.';
COMMENT ON COLUMN runs.prompt_version IS 'Version of the system prompt used.';
COMMENT ON COLUMN runs.corpus_id IS 'Identifier of the knowledge base.';
COMMENT ON COLUMN runs.corpus_hash IS 'Content hash of the knowledge base (changes when any document changes).';
COMMENT ON COLUMN runs.config_json IS 'The whole run configuration as JSON (includes provider label and fault simulation). Never holds secrets.';
COMMENT ON COLUMN runs.run_key IS 'Eval runs: hash of configuration and questions file, used to resume an interrupted batch. NULL for interactive runs.';

CREATE TABLE turns (
    turn_id VARCHAR PRIMARY KEY,
    run_id VARCHAR NOT NULL,
    question VARCHAR NOT NULL,
    answer VARCHAR,
    status VARCHAR NOT NULL,
    error VARCHAR,
    started_at TIMESTAMPTZ,
    latency_ms DOUBLE,
    tokens_in BIGINT,
    tokens_out BIGINT
);
COMMENT ON TABLE turns IS 'One row per turn (question and answer). `turn_id` is the payload''s `turn_id` and keys every other table.';
COMMENT ON COLUMN turns.turn_id IS 'Turn identifier, equal to the sources payload''s `turn_id`.';
COMMENT ON COLUMN turns.run_id IS 'The run (configuration) this turn belongs to; joins `runs`.';
COMMENT ON COLUMN turns.question IS 'The question as asked.';
COMMENT ON COLUMN turns.answer IS 'The answer markdown, with inline citations as the model wrote them.';
COMMENT ON COLUMN turns.status IS '`ok`, or an error status such as `provider_error` or `step_limit`.';
COMMENT ON COLUMN turns.error IS 'Error message when status is not `ok`.';
COMMENT ON COLUMN turns.started_at IS 'When the turn started (UTC).';
COMMENT ON COLUMN turns.latency_ms IS 'Wall time of the whole turn (model calls and tools), in milliseconds.';
COMMENT ON COLUMN turns.tokens_in IS 'Prompt tokens summed over the turn''s model calls; NULL unless every call reported them.';
COMMENT ON COLUMN turns.tokens_out IS 'Completion tokens summed over the turn''s model calls; NULL unless every call reported them.';

CREATE TABLE tool_calls (
    turn_id VARCHAR NOT NULL,
    seq INTEGER NOT NULL,
    name VARCHAR NOT NULL,
    exposure VARCHAR NOT NULL,
    args_json VARCHAR,
    latency_ms DOUBLE,
    n_results INTEGER NOT NULL,
    error VARCHAR,
    call_id VARCHAR
);
COMMENT ON TABLE tool_calls IS 'One row per tool call in agent mode, in call order. Excerpt-mode turns have none.';
COMMENT ON COLUMN tool_calls.turn_id IS 'The turn; joins `turns`.';
COMMENT ON COLUMN tool_calls.seq IS 'Call order within the turn, from 0 (the payload''s `tool_calls[].seq`).';
COMMENT ON COLUMN tool_calls.name IS 'Tool name: `search`, `fetch_document`, `list_categories`, `list_articles`, `browse_section`, …';
COMMENT ON COLUMN tool_calls.exposure IS 'What the tool shows of a document: `full`, `snippet` or `title`.';
COMMENT ON COLUMN tool_calls.args_json IS 'Arguments the model passed, as JSON.';
COMMENT ON COLUMN tool_calls.latency_ms IS 'Tool execution time in milliseconds.';
COMMENT ON COLUMN tool_calls.n_results IS 'Number of documents the call returned (rows in `retrieved_items`).';
COMMENT ON COLUMN tool_calls.error IS 'Error message the tool returned to the model (bad arguments, unknown tool), else NULL.';
COMMENT ON COLUMN tool_calls.call_id IS 'The provider''s id for the call, when it gives one.';

CREATE TABLE retrieved_items (
    turn_id VARCHAR NOT NULL,
    tool_call_seq INTEGER,
    rank INTEGER,
    doc_id VARCHAR NOT NULL,
    chunk_index INTEGER,
    score DOUBLE,
    exposure VARCHAR NOT NULL,
    position INTEGER NOT NULL,
    excerpt_n INTEGER,
    page INTEGER
);
COMMENT ON TABLE retrieved_items IS 'Every item any tool returned (agent mode) or every numbered excerpt (excerpt mode), one row each, duplicates kept.';
COMMENT ON COLUMN retrieved_items.turn_id IS 'The turn; joins `turns`.';
COMMENT ON COLUMN retrieved_items.tool_call_seq IS 'The tool call that returned the item (joins `tool_calls.seq`); NULL for excerpt-mode excerpts, which no tool call returned.';
COMMENT ON COLUMN retrieved_items.rank IS 'Rank the tool gave the item (1 = first): the retriever rank for search results, the listing order for listings; the excerpt number for excerpts; NULL when the tool gave none.';
COMMENT ON COLUMN retrieved_items.doc_id IS 'Document id.';
COMMENT ON COLUMN retrieved_items.chunk_index IS 'Chunk of the document the item came from, when the tool returned a chunk.';
COMMENT ON COLUMN retrieved_items.score IS 'Retriever score, when the tool returned one.';
COMMENT ON COLUMN retrieved_items.exposure IS 'Exposure of this item: the tool''s exposure; always `snippet` for excerpts.';
COMMENT ON COLUMN retrieved_items.position IS 'Order within its tool call''s results (or among the excerpts), from 1.';
COMMENT ON COLUMN retrieved_items.excerpt_n IS 'Excerpt mode: the number `n` of the excerpt `[n]`; NULL in agent mode.';
COMMENT ON COLUMN retrieved_items.page IS 'Page number, for paged formats (PDF).';

CREATE TABLE citations (
    turn_id VARCHAR NOT NULL,
    idx INTEGER NOT NULL,
    target VARCHAR NOT NULL,
    doc_id VARCHAR,
    valid BOOLEAN NOT NULL,
    reason VARCHAR,
    nearest_doc_id VARCHAR,
    edit_distance INTEGER,
    n INTEGER,
    start_offset INTEGER,
    end_offset INTEGER
);
COMMENT ON TABLE citations IS 'Every citation occurrence in the answer, in order, with its validation outcome. Rejected ones are never auto-corrected.';
COMMENT ON COLUMN citations.turn_id IS 'The turn; joins `turns`.';
COMMENT ON COLUMN citations.idx IS 'Occurrence order in the answer, from 0.';
COMMENT ON COLUMN citations.target IS 'The raw link target, or `[n]` for an excerpt marker.';
COMMENT ON COLUMN citations.doc_id IS 'The retrieved document the target resolved to; NULL when rejected.';
COMMENT ON COLUMN citations.valid IS 'True when the target resolved to a retrieved document (or an existing excerpt).';
COMMENT ON COLUMN citations.reason IS 'Why it was rejected: `not_retrieved` or `out_of_range`; NULL when valid.';
COMMENT ON COLUMN citations.nearest_doc_id IS 'For `not_retrieved`: the retrieved id closest to the target (explains, never corrects).';
COMMENT ON COLUMN citations.edit_distance IS 'Levenshtein distance between the target''s id part and `nearest_doc_id`.';
COMMENT ON COLUMN citations.n IS 'Excerpt number for `[n]` markers; NULL for links.';
COMMENT ON COLUMN citations.start_offset IS 'Character offset of the citation in the answer.';
COMMENT ON COLUMN citations.end_offset IS 'Character offset just after the citation.';

CREATE TABLE sources (
    turn_id VARCHAR NOT NULL,
    doc_id VARCHAR NOT NULL,
    title VARCHAR,
    url VARCHAR,
    retrieved BOOLEAN NOT NULL,
    cited BOOLEAN NOT NULL,
    consulted BOOLEAN NOT NULL,
    exposure VARCHAR NOT NULL,
    reason VARCHAR,
    kind VARCHAR,
    artifact_kind VARCHAR,
    tool_call_seq INTEGER,
    position INTEGER NOT NULL,
    shown_position INTEGER
);
COMMENT ON TABLE sources IS 'One row per document the turn retrieved, with its membership in the three sets (DESIGN.md §1). The payload''s `sets` are exactly: retrieved = all rows, cited = rows with `cited`, consulted = rows with `consulted`.';
COMMENT ON COLUMN sources.turn_id IS 'The turn; joins `turns`.';
COMMENT ON COLUMN sources.doc_id IS 'Document id.';
COMMENT ON COLUMN sources.title IS 'Document title as the tools returned it.';
COMMENT ON COLUMN sources.url IS 'Document URL, when it has one.';
COMMENT ON COLUMN sources.retrieved IS 'In the retrieved set (always true: only retrieved documents can be cited or consulted).';
COMMENT ON COLUMN sources.cited IS 'In the cited set: the answer links it (after validation).';
COMMENT ON COLUMN sources.consulted IS 'In the consulted set: the model read its text (opened in full, or a cited snippet).';
COMMENT ON COLUMN sources.exposure IS 'Strongest exposure over the turn: `full` > `snippet` > `title`.';
COMMENT ON COLUMN sources.reason IS 'Why it is or is not consulted, e.g. `opened in full`, `snippet cited`, `listed only`.';
COMMENT ON COLUMN sources.kind IS '`source` or `generated` (a generated artifact, never ground truth).';
COMMENT ON COLUMN sources.artifact_kind IS 'Kind of generated artifact (e.g. category overview), else NULL.';
COMMENT ON COLUMN sources.tool_call_seq IS 'First tool call that gave the strongest exposure; NULL for excerpts.';
COMMENT ON COLUMN sources.position IS 'Order in the payload''s `sets.retrieved` (first seen), from 1.';
COMMENT ON COLUMN sources.shown_position IS 'Order in the payload''s `sources` array (cited plus consulted), from 1; NULL when not in it.';
"""


@migration(SQL)
def m001_initial(con) -> None:
    """SQL only."""
