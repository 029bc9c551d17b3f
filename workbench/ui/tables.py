"""Query results as a table, a plotly chart and a CSV download (trace explorer and doc-gap queue)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, TypeVar

import pandas as pd
import streamlit as st

from ..analysis.charts import measure_figure, split_columns
from ..config import default_db_path
from ..errors import ReadOnlyQueryError, WorkbenchError
from ..render.escaping import display_text, display_value, escape_markdown
from ..text import spreadsheet_cell
from ..trace.lake import store_exists, store_version

T = TypeVar("T")


@dataclass(frozen=True)
class QueryResult:
    """A query's table, or why there is none (`level` "info" or "error", with an icon)."""

    df: pd.DataFrame | None
    level: str | None = None
    message: str | None = None
    icon: str | None = None

    def show_message(self) -> None:
        if self.message:
            getattr(st, self.level)(escape_markdown(self.message), icon=self.icon)


def db_version(path: str | Path) -> tuple:
    """Changes whenever the trace database at `path` is written (`trace.lake.store_version`): what the app's caches
    of its reads are keyed by."""
    return store_version(path)


def query(db: str | None, sql: str, *, user: bool, owner: str | None = None) -> QueryResult:
    """Run `sql` read-only on the trace database; a message (never a traceback) when it fails. A result is
    reused while the database is unchanged (`db_version`, and at most `QUERY_CACHE_SECONDS`), so a page
    opened again does not query it again. A typed query (`user`) with `owner` reads only what that viewer
    may see (`trace/visible.py`); the result is kept per owner, never handed to another viewer."""

    path = str(db or default_db_path())
    return _query(path, sql, user, db_version(path), owner)


#: Longest a query result is reused for an unchanged trace database.
QUERY_CACHE_SECONDS = 60


@st.cache_data(show_spinner=False, ttl=QUERY_CACHE_SECONDS, max_entries=64)
def _query(path: str, sql: str, user: bool, version: tuple, owner: str | None = None) -> QueryResult:
    from ..trace import TraceReader

    reader = TraceReader(path)
    if not store_exists(reader.path):
        return QueryResult(None, "info", f"No trace database at {reader.path} yet: ask a question on the chat page "
                                         "(every turn is traced) or run `workbench ask …`.")
    try:
        columns, rows, cut = reader.user_query(sql, files=False, owner=owner) if user else (*reader.rows(sql), None)
    except ReadOnlyQueryError as exc:
        return QueryResult(None, "error", str(exc), "🛑")
    except WorkbenchError as exc:
        return QueryResult(None, "error", str(exc), "⚠️")
    return QueryResult(pd.DataFrame(rows, columns=columns), *(("warning", cut, "✂️") if cut else ()))


def stored(read: Callable[..., T], path: str | Path, *args: Any, frozen: bool = False) -> T:
    """`read(path, *args)`, a read of the trace store (`trace.experiments.list_runs`, …), reused while the store is
    unchanged (`db_version`: any process's write changes it) and for at most `QUERY_CACHE_SECONDS`: a page draws its
    reads on every rerun, a click included. A failure is raised, never kept. Each caller gets its own copy, but with
    `frozen` (an immutable result that cannot be pickled, e.g. `trace.results.Comparison`): the one object, shared."""
    cached = _stored_frozen if frozen else _stored
    return cached(read, f"{read.__module__}.{read.__qualname__}", str(path), db_version(path), args)


@st.cache_data(show_spinner=False, ttl=QUERY_CACHE_SECONDS, max_entries=64)
def _stored(_read: Callable[..., T], name: str, path: str, version: tuple, args: tuple) -> T:
    return _read(path, *args)


@st.cache_resource(show_spinner=False, ttl=QUERY_CACHE_SECONDS, max_entries=16)
def _stored_frozen(_read: Callable[..., T], name: str, path: str, version: tuple, args: tuple) -> T:
    return _read(path, *args)


#: The columns of a viewer's own turns, as the Trace explorer shows them to someone without its SQL.
OWN_TURNS = """SELECT started_at, question, status, n_retrieved, n_cited, n_consulted, n_rejected, conversation_id
FROM turns WHERE owner = ? ORDER BY started_at DESC LIMIT 500"""


def own_turns(db: str | None, owner: str) -> QueryResult:
    """The latest 500 turns of `owner` (`turns.owner`): what a viewer who is not an analyst gets of the trace
    database (docs/security.md, "Who sees what")."""
    path = str(db or default_db_path())
    return _own_turns(path, owner, db_version(path))


@st.cache_data(show_spinner=False, ttl=QUERY_CACHE_SECONDS, max_entries=64)
def _own_turns(path: str, owner: str, version: tuple) -> QueryResult:
    from ..trace import TraceReader
    from ..trace.history import OWNERS

    reader = TraceReader(path)
    if not store_exists(reader.path):
        return QueryResult(None, "info", "No turns yet: ask a question on the chat page.")
    try:
        got = reader.rows_with(lambda schema: OWN_TURNS if OWNERS in schema.applied else None, [owner])
        if got is None:
            return QueryResult(None, "info", "No turns of yours yet: ask a question on the chat page.")
        columns, rows = got
    except WorkbenchError as exc:
        return QueryResult(None, "error", str(exc), "⚠️")
    return QueryResult(pd.DataFrame(rows, columns=columns))


def read(db: str | None, sql: str, *, user: bool) -> pd.DataFrame | None:
    """`query`, with its message shown in the page."""
    result = query(db, sql, user=user)
    result.show_message()
    return result.df


def on_submit(db: str | None, sql: str, *, submitted: bool, key: str = "sql_result",
              owner: str | None = None) -> QueryResult:
    """The result of the page's query, run only when the form is `submitted` (or nothing has run for this
    database yet, or it did not exist yet); any other rerun — a widget elsewhere, a page switch — shows
    the last result again instead of querying the database once more."""
    last = st.session_state.get(key)
    if submitted or last is None or last[0] != db or (last[1].df is None and last[1].level == "info"):
        last = (db, query(db, sql, user=True, owner=owner))
        st.session_state[key] = last
    return last[1]


def chart(df: pd.DataFrame, key: str) -> None:
    """A plotly chart of one measure (a numeric column, picked when there are several) per row, the rows
    named by every labelling column that differs between them (a line over time when the first column is
    a time)."""

    if df.empty or df.shape[1] < 2:
        return
    _, measures = split_columns(df)
    if not measures:
        return
    measure = (st.selectbox("Chart", measures, key=f"{key}-measure", help="One measure per chart: its own axis")
               if len(measures) > 1 else measures[0])
    st.plotly_chart(measure_figure(df, measure if measure in measures else measures[0]), width="stretch", key=key)


def shown(df: pd.DataFrame) -> pd.DataFrame:
    """`df` as the page shows it: every string cell and column name through `render.escaping.display_text` (bidi
    controls visible, long lines wrapped); the CSV download keeps the data (`csv_bytes`)."""
    return df.map(display_value).rename(columns=lambda c: display_text(str(c)))


def csv_bytes(df: pd.DataFrame) -> bytes:
    """The CSV download of `df`: the data exactly, except that a cell a spreadsheet would take for a formula
    is written as text (`text.spreadsheet_cell`, docs/security.md)."""
    # CRLF rows (RFC 4180), so a cell holding a bare CR is quoted instead of splitting its row
    return df.map(spreadsheet_cell).rename(columns=spreadsheet_cell).to_csv(index=False, lineterminator="\r\n").encode()


def table(df: pd.DataFrame, name: str, key: str) -> None:
    st.dataframe(shown(df), hide_index=True, width="stretch")
    st.download_button("Download CSV", csv_bytes(df), file_name=f"{name}.csv",
                       mime="text/csv", key=f"csv-{key}")
