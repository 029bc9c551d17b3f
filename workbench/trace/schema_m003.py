"""Migration m003: each turn's question kind and set sizes, stored with it so the views stay fast.

Like every migration, frozen once released: change the schema by appending a new one (a new
`schema_mNNN.py`, registered by `@migration`).
"""

import re

from .migration import migration

SQL = """
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


#: The question classifier as m003 shipped it (`providers.offline.is_structural` then, `questions.question_kind`
#: since): frozen here, so what this migration computes never changes when the live classifier does.
_STRUCTURAL = re.compile(
    r"\b(what|which)\b.{0,40}\b(articles?|topics?|categories|sections?|docs|documents|guides|pages)\b"
    r"|^\s*(list|show|browse)\b.{0,30}\b(articles?|topics?|categories|sections?|docs|documents|guides)\b"
    r"|\btable of contents\b|\bwhat (can|do) you (help|cover|know)",
    re.IGNORECASE,
)
_ANSWERISH = re.compile(r"\b(how|why|fix|error|configure|set ?up|enable|disable|reset|change)\b", re.I)


def _kind(question: str) -> str:
    structural = bool(_STRUCTURAL.search(question)) and not _ANSWERISH.search(question)
    return "structural" if structural else "substantive"


@migration(SQL)
def m003_turn_set_sizes(con) -> None:
    """Classify the questions of turns written before `question_kind` existed, with the classifier of then."""
    questions = [q for (q,) in con.execute("SELECT DISTINCT question FROM turns WHERE question_kind IS NULL").fetchall()]
    if questions:
        import pyarrow as pa  # loads only when a backfill needs it

        con.register("question_kinds", pa.table({"question": questions, "kind": [_kind(q) for q in questions]}))
        con.execute("UPDATE turns SET question_kind = k.kind FROM question_kinds k WHERE turns.question = k.question")
        con.unregister("question_kinds")
