"""The trace schema: append-only named migrations, recorded in the `migrations` table.

Never edit a migration that has shipped: add a new one at the end. Every table, view and column
carries a `COMMENT ON`, which `docs.py` turns into docs/traces.md (so the docs cannot drift).
A migration is SQL plus an optional Python step (for backfills that need Python, e.g. the question
classifier); each runs in its own transaction together with its row in `migrations`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from ..questions import question_kind
from .schema_m009 import M009_ABLATIONS
from .schema_m010 import M010_USAGE_PER_CORPUS
from .schema_m011 import M011_EXPERIMENTS
from .schema_m012 import M012_CONVERSATIONS
from .schema_m013 import M013_CONVERSATION_VIEWS
from .schema_m014 import M014_LATEST_VERIFICATION, reuse_latest_verification
from .schema_m016 import M016_CONVERSATION_POSITIONS
from .schema_m017 import M017_DOC_GAP_KINDS, keep_gap_comments
from .schema_m018 import M018_TURN_USER
from .schema_m019 import M019_TOOL_CALL_CUTS
from .schema_m020 import M020_AUDIT
from .schema_m021 import M021_TURN_LINES, score_by_line
from .schema_m022 import M022_SAVED_QUERIES
from .schema_m023 import audited_by_line
from .schema_m024 import M024_CONVERSATION_SHARES


@dataclass(frozen=True)
class Migration:
    name: str
    sql: str
    python: Callable[[Any], None] | None = None


M001_INITIAL = """
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

M002_CLAIMS = """
CREATE TABLE claims (
    turn_id VARCHAR NOT NULL,
    claim_idx INTEGER NOT NULL,
    text VARCHAR NOT NULL,
    cited_doc_ids VARCHAR[],
    judge VARCHAR,
    score DOUBLE,
    verdict VARCHAR,
    best_span VARCHAR,
    wrong_excerpt BOOLEAN,
    generated_only BOOLEAN,
    extra_json VARCHAR,
    added_at TIMESTAMPTZ
);
COMMENT ON TABLE claims IS 'Claims of an answer with their faithfulness verdicts (one row per claim and judge). Written with the turn, or later by `add_claims`.';
COMMENT ON COLUMN claims.turn_id IS 'The turn; joins `turns`.';
COMMENT ON COLUMN claims.claim_idx IS 'Order of the claim in the answer, from 0.';
COMMENT ON COLUMN claims.text IS 'The claim text.';
COMMENT ON COLUMN claims.cited_doc_ids IS 'Documents the claim cites.';
COMMENT ON COLUMN claims.judge IS 'The judge that scored the claim.';
COMMENT ON COLUMN claims.score IS 'Support score given by the judge.';
COMMENT ON COLUMN claims.verdict IS 'The judge''s verdict, e.g. supported / partial / unsupported.';
COMMENT ON COLUMN claims.best_span IS 'The evidence span that best supports the claim.';
COMMENT ON COLUMN claims.wrong_excerpt IS 'An uncited retrieved excerpt supports the claim clearly better than the cited one.';
COMMENT ON COLUMN claims.generated_only IS 'The claim''s only support is a generated artifact.';
COMMENT ON COLUMN claims.extra_json IS 'Any further fields the judge reported, as JSON.';
COMMENT ON COLUMN claims.added_at IS 'When the claim rows were written (UTC).';
"""

M003_TURN_SET_SIZES = """
ALTER TABLE turns ADD COLUMN question_kind VARCHAR;
ALTER TABLE turns ADD COLUMN n_retrieved INTEGER;
ALTER TABLE turns ADD COLUMN n_cited INTEGER;
ALTER TABLE turns ADD COLUMN n_consulted INTEGER;
ALTER TABLE turns ADD COLUMN n_rejected INTEGER;
ALTER TABLE turns ADD COLUMN n_tool_calls INTEGER;
ALTER TABLE turns ADD COLUMN n_model_calls INTEGER;
ALTER TABLE turns ADD COLUMN model_latency_ms DOUBLE;
UPDATE turns SET
    n_retrieved = (SELECT count(*) FROM sources s WHERE s.turn_id = turns.turn_id),
    n_cited = (SELECT count(*) FILTER (WHERE s.cited) FROM sources s WHERE s.turn_id = turns.turn_id),
    n_consulted = (SELECT count(*) FILTER (WHERE s.consulted) FROM sources s WHERE s.turn_id = turns.turn_id),
    n_rejected = (SELECT count(DISTINCT c.target) FROM citations c WHERE c.turn_id = turns.turn_id AND NOT c.valid),
    n_tool_calls = (SELECT count(*) FROM tool_calls t WHERE t.turn_id = turns.turn_id);
COMMENT ON COLUMN turns.question_kind IS '`structural` (asks what the knowledge base contains, e.g. "what articles do you have?") or `substantive` (asks about a topic). Structural questions are never doc gaps.';
COMMENT ON COLUMN turns.n_retrieved IS 'Size of the retrieved set (rows in `sources`), stored with the turn so views stay fast.';
COMMENT ON COLUMN turns.n_cited IS 'Size of the cited set (`sources.cited`).';
COMMENT ON COLUMN turns.n_consulted IS 'Size of the consulted set (`sources.consulted`).';
COMMENT ON COLUMN turns.n_rejected IS 'Number of distinct rejected citation targets (the payload''s `rejected_citations`).';
COMMENT ON COLUMN turns.n_tool_calls IS 'Number of tool calls (rows in `tool_calls`).';
COMMENT ON COLUMN turns.n_model_calls IS 'Number of provider calls in the turn; NULL for turns written before this column existed.';
COMMENT ON COLUMN turns.model_latency_ms IS 'Time spent in provider calls, summed, in milliseconds; NULL when unknown.';
"""

M004_VIEWS = r"""
CREATE VIEW turn_sets AS
SELECT t.turn_id, t.run_id, r.provider, r.model, r.retriever, r.mode, t.started_at, t.question,
       t.question_kind, t.status, t.n_retrieved, t.n_cited, t.n_consulted, t.n_rejected, t.n_tool_calls
FROM turns t JOIN runs r USING (run_id);
COMMENT ON VIEW turn_sets IS 'Per turn: the sizes of the three sets and the number of rejected citations, with the run''s configuration.';
COMMENT ON COLUMN turn_sets.turn_id IS 'The turn.';
COMMENT ON COLUMN turn_sets.run_id IS 'Its run.';
COMMENT ON COLUMN turn_sets.provider IS 'Provider of the run.';
COMMENT ON COLUMN turn_sets.model IS 'Model of the run.';
COMMENT ON COLUMN turn_sets.retriever IS 'Retriever of the run.';
COMMENT ON COLUMN turn_sets.mode IS 'Mode of the run (`agent` or `excerpts`).';
COMMENT ON COLUMN turn_sets.started_at IS 'When the turn started (UTC).';
COMMENT ON COLUMN turn_sets.question IS 'The question.';
COMMENT ON COLUMN turn_sets.question_kind IS '`structural` or `substantive`.';
COMMENT ON COLUMN turn_sets.status IS '`ok` or the error status.';
COMMENT ON COLUMN turn_sets.n_retrieved IS 'Size of the retrieved set.';
COMMENT ON COLUMN turn_sets.n_cited IS 'Size of the cited set.';
COMMENT ON COLUMN turn_sets.n_consulted IS 'Size of the consulted set.';
COMMENT ON COLUMN turn_sets.n_rejected IS 'Distinct rejected citation targets.';
COMMENT ON COLUMN turn_sets.n_tool_calls IS 'Number of tool calls.';

CREATE VIEW doc_gaps AS
-- grouped per (question, run) first, so "runs" needs no count(DISTINCT …): 3x faster on 1M turns
WITH per_run AS (
    SELECT lower(trim(regexp_replace(t.question, '\s+', ' ', 'g'))) AS question_key, t.run_id,
           arg_max(t.question, t.started_at) AS question, count(*) AS asks,
           min(t.started_at) AS first_seen, max(t.started_at) AS last_seen,
           arg_max(t.turn_id, t.started_at) AS last_turn_id, max(t.n_retrieved) AS max_retrieved
    FROM turns t
    WHERE t.status = 'ok' AND t.question_kind = 'substantive' AND t.n_consulted = 0
    GROUP BY 1, 2
)
SELECT question_key, arg_max(question, last_seen) AS question, sum(asks)::BIGINT AS asks, count(*) AS runs,
       min(first_seen) AS first_seen, max(last_seen) AS last_seen,
       arg_max(last_turn_id, last_seen) AS last_turn_id, max(max_retrieved) AS max_retrieved
FROM per_run
GROUP BY 1
ORDER BY asks DESC, last_seen DESC;
COMMENT ON VIEW doc_gaps IS 'The doc-gap queue: substantive questions whose turn consulted nothing (the knowledge base had nothing the model read), grouped by normalised question, with counts and first/last seen. Structural (listing) questions and failed turns are not gaps.';
COMMENT ON COLUMN doc_gaps.question_key IS 'The question lower-cased with whitespace collapsed: the grouping key.';
COMMENT ON COLUMN doc_gaps.question IS 'The most recent wording of the question.';
COMMENT ON COLUMN doc_gaps.asks IS 'How many turns asked it and consulted nothing.';
COMMENT ON COLUMN doc_gaps.runs IS 'In how many runs.';
COMMENT ON COLUMN doc_gaps.first_seen IS 'First such turn (UTC).';
COMMENT ON COLUMN doc_gaps.last_seen IS 'Latest such turn (UTC).';
COMMENT ON COLUMN doc_gaps.last_turn_id IS 'The latest such turn, to inspect it.';
COMMENT ON COLUMN doc_gaps.max_retrieved IS 'Most documents any of those turns retrieved (0: retrieval found nothing at all).';

CREATE VIEW provider_summary AS
SELECT r.provider, r.model,
       count(DISTINCT t.run_id) AS runs,
       count(*) AS turns,
       avg((t.status <> 'ok')::INTEGER) AS error_rate,
       median(t.latency_ms) AS median_latency_ms,
       quantile_cont(t.latency_ms, 0.95) AS p95_latency_ms,
       avg(t.tokens_in) AS avg_tokens_in,
       avg(t.tokens_out) AS avg_tokens_out,
       avg(t.n_retrieved) AS avg_retrieved,
       avg(t.n_cited) AS avg_cited,
       avg(t.n_consulted) AS avg_consulted,
       avg((t.n_rejected > 0)::INTEGER) AS rejected_turn_rate,
       sum(t.n_rejected) AS rejected_citations,
       avg((t.n_consulted = 0)::INTEGER) FILTER (WHERE t.question_kind = 'substantive' AND t.status = 'ok') AS gap_rate
FROM turns t JOIN runs r USING (run_id)
GROUP BY r.provider, r.model
ORDER BY turns DESC;
COMMENT ON VIEW provider_summary IS 'Per provider and model: turns, error rate, latency, tokens, average set sizes, how often citations were rejected, and the share of substantive turns that consulted nothing (gap_rate).';
COMMENT ON COLUMN provider_summary.provider IS 'Provider name.';
COMMENT ON COLUMN provider_summary.model IS 'Model name.';
COMMENT ON COLUMN provider_summary.runs IS 'Runs with this provider and model.';
COMMENT ON COLUMN provider_summary.turns IS 'Turns.';
COMMENT ON COLUMN provider_summary.error_rate IS 'Share of turns whose status is not `ok`.';
COMMENT ON COLUMN provider_summary.median_latency_ms IS 'Median turn latency (ms).';
COMMENT ON COLUMN provider_summary.p95_latency_ms IS '95th percentile turn latency (ms).';
COMMENT ON COLUMN provider_summary.avg_tokens_in IS 'Mean prompt tokens per turn (turns that reported them).';
COMMENT ON COLUMN provider_summary.avg_tokens_out IS 'Mean completion tokens per turn (turns that reported them).';
COMMENT ON COLUMN provider_summary.avg_retrieved IS 'Mean retrieved-set size.';
COMMENT ON COLUMN provider_summary.avg_cited IS 'Mean cited-set size.';
COMMENT ON COLUMN provider_summary.avg_consulted IS 'Mean consulted-set size.';
COMMENT ON COLUMN provider_summary.rejected_turn_rate IS 'Share of turns with at least one rejected citation.';
COMMENT ON COLUMN provider_summary.rejected_citations IS 'Distinct rejected citation targets, summed over turns.';
COMMENT ON COLUMN provider_summary.gap_rate IS 'Share of substantive `ok` turns that consulted nothing.';

CREATE VIEW retriever_summary AS
SELECT r.retriever, r.mode, r.k,
       count(DISTINCT t.run_id) AS runs,
       count(*) AS turns,
       avg(t.n_retrieved) AS avg_retrieved,
       avg(t.n_cited) AS avg_cited,
       avg(t.n_consulted) AS avg_consulted,
       sum(t.n_consulted) / nullif(sum(t.n_retrieved), 0) AS consulted_share,
       avg((t.n_consulted = 0)::INTEGER) FILTER (WHERE t.question_kind = 'substantive' AND t.status = 'ok') AS gap_rate,
       median(t.latency_ms) AS median_latency_ms
FROM turns t JOIN runs r USING (run_id)
GROUP BY r.retriever, r.mode, r.k
ORDER BY turns DESC;
COMMENT ON VIEW retriever_summary IS 'Per retriever, mode and k: average set sizes, the share of retrieved documents that were consulted, and the share of substantive turns that consulted nothing (gap_rate).';
COMMENT ON COLUMN retriever_summary.retriever IS 'Retriever name.';
COMMENT ON COLUMN retriever_summary.mode IS '`agent` or `excerpts`.';
COMMENT ON COLUMN retriever_summary.k IS 'Results per search or excerpts.';
COMMENT ON COLUMN retriever_summary.runs IS 'Runs with this retriever, mode and k.';
COMMENT ON COLUMN retriever_summary.turns IS 'Turns.';
COMMENT ON COLUMN retriever_summary.avg_retrieved IS 'Mean retrieved-set size.';
COMMENT ON COLUMN retriever_summary.avg_cited IS 'Mean cited-set size.';
COMMENT ON COLUMN retriever_summary.avg_consulted IS 'Mean consulted-set size.';
COMMENT ON COLUMN retriever_summary.consulted_share IS 'Consulted documents / retrieved documents over all turns: how much of what was retrieved was read and used.';
COMMENT ON COLUMN retriever_summary.gap_rate IS 'Share of substantive `ok` turns that consulted nothing.';
COMMENT ON COLUMN retriever_summary.median_latency_ms IS 'Median turn latency (ms).';
"""


def _backfill_question_kind(con) -> None:
    """m003's Python step: classify the questions of turns written before `question_kind` existed
    (with `questions.question_kind`, the classifier every new turn is written with)."""
    questions = [q for (q,) in con.execute("SELECT DISTINCT question FROM turns WHERE question_kind IS NULL").fetchall()]
    if questions:
        import pyarrow as pa  # loads only when a backfill needs it

        con.register("question_kinds", pa.table({"question": questions,
                                                 "kind": [question_kind(q) for q in questions]}))
        con.execute("UPDATE turns SET question_kind = k.kind FROM question_kinds k WHERE turns.question = k.question")
        con.unregister("question_kinds")


# The judge's version with each claim; and, while a comment is being written, the `sources` comment
# points at docs/design.md (which ships with the project) instead of a design file outside it.
M005_CLAIMS_JUDGE_VERSION = """
ALTER TABLE claims ADD COLUMN judge_version VARCHAR;
COMMENT ON COLUMN claims.judge_version IS 'Version of the judge that scored the claim (its `version`, e.g. `lexical-v1`): verdicts are comparable only within one version. NULL for claims written before this column existed, or added without one.';
COMMENT ON TABLE sources IS 'One row per document the turn retrieved, with its membership in the three sets (docs/design.md §1). The payload''s `sets` are exactly: retrieved = all rows, cited = rows with `cited`, consulted = rows with `consulted`.';
"""


M006_TOOL_PROTOCOL = """
ALTER TABLE runs ADD COLUMN tool_protocol VARCHAR;
UPDATE runs SET tool_protocol = 'native' WHERE mode = 'agent';
COMMENT ON COLUMN runs.tool_protocol IS 'Agent mode: how the model called tools, `native` (the provider''s tool calling) or `json-steps` (each model output forced by a JSON schema to be one action). Tool calls, citations and sources are recorded the same way under both. NULL in excerpt mode (no tools). Runs written before this column existed were `native`.';
"""


M007_MODEL_CALLS_PASSAGES = """
CREATE TABLE model_calls (
    turn_id VARCHAR NOT NULL,
    seq INTEGER NOT NULL,
    provider VARCHAR,
    model VARCHAR,
    model_version VARCHAR,
    latency_ms DOUBLE,
    tokens_in BIGINT,
    tokens_out BIGINT,
    finish_reason VARCHAR,
    retries INTEGER,
    n_tool_calls INTEGER
);
COMMENT ON TABLE model_calls IS 'One row per provider call of a turn, in call order; turns written before this table existed have none (their totals are on `turns`). The agent loop runs the tool calls a model call asked for right after it, so a turn reads: call 0, its `n_tool_calls` tool calls (in `tool_calls.seq` order), call 1, … — the order `workbench export --openinference` lays spans out in.';
COMMENT ON COLUMN model_calls.turn_id IS 'The turn; joins `turns`.';
COMMENT ON COLUMN model_calls.seq IS 'Call order within the turn, from 0.';
COMMENT ON COLUMN model_calls.provider IS 'Provider that answered, e.g. `offline`, `ollama`, `gemini`.';
COMMENT ON COLUMN model_calls.model IS 'Model requested.';
COMMENT ON COLUMN model_calls.model_version IS 'Model the server says answered (e.g. `gemini-2.5-flash-001`), when it says.';
COMMENT ON COLUMN model_calls.latency_ms IS 'Wall time of the call, retries included, in milliseconds.';
COMMENT ON COLUMN model_calls.tokens_in IS 'Prompt tokens the provider reported; NULL when it reported none.';
COMMENT ON COLUMN model_calls.tokens_out IS 'Completion tokens the provider reported; NULL when it reported none.';
COMMENT ON COLUMN model_calls.finish_reason IS 'Why the model stopped (`stop`, `tool_calls`, `error`, …), as the provider said.';
COMMENT ON COLUMN model_calls.retries IS 'Rate-limit or server-error retries before the call succeeded (or gave up).';
COMMENT ON COLUMN model_calls.n_tool_calls IS 'Tool calls this step asked for (run right after it); 0 for the final answer.';

CREATE TABLE passages (
    passage_id VARCHAR PRIMARY KEY,
    text VARCHAR NOT NULL
);
COMMENT ON TABLE passages IS 'Every distinct passage a tool showed the model (a search snippet, an excerpt), stored once: the same chunk comes back in many turns, so `retrieved_items` keeps only its `passage_id`. Not per turn, so not partitioned in exports.';
COMMENT ON COLUMN passages.passage_id IS 'sha256 of the text, first 32 hex digits: the same text always has the same id.';
COMMENT ON COLUMN passages.text IS 'The passage exactly as the model was shown it.';

ALTER TABLE retrieved_items ADD COLUMN passage_id VARCHAR;
COMMENT ON COLUMN retrieved_items.passage_id IS 'The passage the model was shown for this item (joins `passages`): the search snippet or the excerpt. NULL for title-only listings, for whole-document fetches (the text is the document''s own) and for items written before this column existed.';
"""

# Verification by ablation (m009) adds the verdict counts: it replaces the two macros and the two
# views below whole (CREATE OR REPLACE).
M008_DOC_USAGE = """
CREATE MACRO doc_usage_for(run_ids := NULL) AS TABLE
SELECT s.doc_id,
       arg_max(s.title, t.started_at) AS title,
       arg_max(s.kind, t.started_at) AS kind,
       arg_max(s.artifact_kind, t.started_at) AS artifact_kind,
       count(*) AS retrieved_turns,
       count(*) FILTER (WHERE s.cited) AS cited_turns,
       count(*) FILTER (WHERE s.consulted) AS consulted_turns,
       count(DISTINCT t.run_id) AS runs,
       min(t.started_at) AS first_used,
       max(t.started_at) AS last_used,
       max(t.started_at) FILTER (WHERE s.consulted) AS last_consulted
FROM sources s JOIN turns t USING (turn_id)
WHERE run_ids IS NULL OR list_contains(run_ids, t.run_id)
GROUP BY s.doc_id
ORDER BY consulted_turns DESC, cited_turns DESC, retrieved_turns DESC, s.doc_id;

CREATE MACRO doc_usage_totals_for(run_ids := NULL) AS TABLE
SELECT CASE WHEN kind = 'generated' THEN 'generated: ' || coalesce(artifact_kind, 'retrieval aid')
            ELSE coalesce(kind, 'source') END AS category,
       count(*) AS documents,
       sum(retrieved_turns)::BIGINT AS retrieved,
       sum(cited_turns)::BIGINT AS cited,
       sum(consulted_turns)::BIGINT AS consulted,
       count(*) FILTER (WHERE consulted_turns > 0) AS documents_consulted,
       count(*) FILTER (WHERE consulted_turns = 0) AS documents_never_consulted
FROM doc_usage_for(run_ids := run_ids)
GROUP BY ALL
ORDER BY consulted DESC, retrieved DESC, category;

CREATE VIEW doc_usage AS FROM doc_usage_for();
COMMENT ON VIEW doc_usage IS 'Usage accounting: one row per document any turn retrieved, with the number of turns in which it was retrieved, cited and consulted (the honest basis for usage, billing and content decisions: consulted, not retrieved), most consulted first. Over all runs; for a chosen set of runs: `FROM doc_usage_for(run_ids := [''<run_id>'', …])` (also `workbench usage --run`).';
COMMENT ON COLUMN doc_usage.doc_id IS 'Document id.';
COMMENT ON COLUMN doc_usage.title IS 'Its title, as the latest turn saw it.';
COMMENT ON COLUMN doc_usage.kind IS '`source` or `generated` (a generated artifact).';
COMMENT ON COLUMN doc_usage.artifact_kind IS 'Kind of generated artifact, else NULL.';
COMMENT ON COLUMN doc_usage.retrieved_turns IS 'Turns whose retrieved set holds it (any tool returned it, even as a title).';
COMMENT ON COLUMN doc_usage.cited_turns IS 'Turns whose answer cites it (valid citations only).';
COMMENT ON COLUMN doc_usage.consulted_turns IS 'Turns in which the model read it (opened in full, or a cited snippet).';
COMMENT ON COLUMN doc_usage.runs IS 'Runs with at least one of those turns.';
COMMENT ON COLUMN doc_usage.first_used IS 'First turn that retrieved it (UTC).';
COMMENT ON COLUMN doc_usage.last_used IS 'Latest turn that retrieved it (UTC).';
COMMENT ON COLUMN doc_usage.last_consulted IS 'Latest turn that consulted it (UTC); NULL if never consulted.';

CREATE VIEW doc_usage_totals AS FROM doc_usage_totals_for();
COMMENT ON VIEW doc_usage_totals IS 'Usage totals per category of document (`source`, or `generated: <artifact kind>`), over all runs; for chosen runs: `FROM doc_usage_totals_for(run_ids := [''<run_id>'', …])`.';
COMMENT ON COLUMN doc_usage_totals.category IS '`source`, or `generated: <artifact kind>` for generated artifacts.';
COMMENT ON COLUMN doc_usage_totals.documents IS 'Documents of the category that any turn retrieved.';
COMMENT ON COLUMN doc_usage_totals.retrieved IS 'Document-turns retrieved (sum of `doc_usage.retrieved_turns`).';
COMMENT ON COLUMN doc_usage_totals.cited IS 'Document-turns cited.';
COMMENT ON COLUMN doc_usage_totals.consulted IS 'Document-turns consulted.';
COMMENT ON COLUMN doc_usage_totals.documents_consulted IS 'Documents consulted at least once.';
COMMENT ON COLUMN doc_usage_totals.documents_never_consulted IS 'Documents retrieved but never consulted.';
"""


MIGRATIONS: tuple[Migration, ...] = (
    Migration("m001_initial", M001_INITIAL),
    Migration("m002_claims", M002_CLAIMS),
    Migration("m003_turn_set_sizes", M003_TURN_SET_SIZES, _backfill_question_kind),
    Migration("m004_views", M004_VIEWS),
    Migration("m005_claims_judge_version", M005_CLAIMS_JUDGE_VERSION),
    Migration("m006_tool_protocol", M006_TOOL_PROTOCOL),
    Migration("m007_model_calls_passages", M007_MODEL_CALLS_PASSAGES),
    Migration("m008_doc_usage", M008_DOC_USAGE),
    Migration("m009_ablations", M009_ABLATIONS),
    Migration("m010_usage_per_corpus", M010_USAGE_PER_CORPUS),
    Migration("m011_experiments", M011_EXPERIMENTS),
    Migration("m012_conversations", M012_CONVERSATIONS),
    Migration("m013_conversation_views", M013_CONVERSATION_VIEWS),
    Migration("m014_latest_verification", M014_LATEST_VERIFICATION, reuse_latest_verification),
    Migration("m016_conversation_positions", M016_CONVERSATION_POSITIONS),
    Migration("m017_doc_gap_kinds", M017_DOC_GAP_KINDS, keep_gap_comments),
    Migration("m018_turn_user", M018_TURN_USER),
    Migration("m019_tool_call_cuts", M019_TOOL_CALL_CUTS),
    Migration("m020_audit", M020_AUDIT),
    Migration("m021_turn_lines", M021_TURN_LINES, score_by_line),
    Migration("m022_saved_queries", M022_SAVED_QUERIES),
    Migration("m023_audited_lines", "", audited_by_line),
    Migration("m024_conversation_shares", M024_CONVERSATION_SHARES),
)
