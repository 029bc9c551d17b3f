"""Migration m023: an audited run's turns are scored only by the lines they were matched to.

m021's `expectation_results` matches a turn without a `turn_lines` row to a line by its question's text (a turn
written before m021). An audited run scored against a questions file (`collect --questions`, docs/audit.md)
records the line of every turn it matched; a turn it did not match (reported as such) has no row and must stay
unscored, even when its question's text is a line's (a follow-up "And with Okta?" of another session). So that
fallback now leaves out the turns of audit runs (`runs.kind = 'audit'`); the view is otherwise m021's.
Like every migration, frozen once released: change the schema by appending a new one in `schema.py`.
"""

from .schema_m014 import replace_keeping_comments
from .schema_m021 import M021_VIEW

_FALLBACK = "WHERE NOT EXISTS (SELECT 1 FROM turn_lines l WHERE l.turn_id = t.turn_id)"
#: m021's view, its fallback by question text restricted to runs that are not audits.
M023_VIEW = M021_VIEW.replace(
    _FALLBACK, _FALLBACK + "\n      AND t.run_id NOT IN (SELECT run_id FROM runs WHERE kind = 'audit')")


def audited_by_line(con) -> None:
    """Replace `expectation_results` (`M023_VIEW`), keeping every comment it had."""
    replace_keeping_comments(con, ["expectation_results"], M023_VIEW)
