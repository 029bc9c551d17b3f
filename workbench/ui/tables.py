"""Query results as a table, a plotly chart and a CSV download (trace explorer and doc-gap queue)."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
import streamlit as st

from ..errors import WorkbenchError
from ..render import escape_markdown, plotly_text


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


def query(db: str | None, sql: str, *, user: bool) -> QueryResult:
    """Run `sql` read-only on the trace database; a message (never a traceback) when it fails."""
    from ..config import default_db_path
    from ..errors import ReadOnlyQueryError
    from ..trace import TraceReader

    reader = TraceReader(db or default_db_path())
    if not reader.path.exists():
        return QueryResult(None, "info", f"No trace database at {reader.path} yet: ask a question on the chat page "
                                         "(every turn is traced) or run `workbench ask …`.")
    try:
        columns, rows, cut = reader.user_query(sql, files=False) if user else (*reader.rows(sql), None)
    except ReadOnlyQueryError as exc:
        return QueryResult(None, "error", str(exc), "🛑")
    except WorkbenchError as exc:
        return QueryResult(None, "error", str(exc), "⚠️")
    return QueryResult(pd.DataFrame(rows, columns=columns), *(("warning", cut, "✂️") if cut else ()))


def read(db: str | None, sql: str, *, user: bool) -> pd.DataFrame | None:
    """`query`, with its message shown in the page."""
    result = query(db, sql, user=user)
    result.show_message()
    return result.df


def on_submit(db: str | None, sql: str, *, submitted: bool, key: str = "sql_result") -> QueryResult:
    """The result of the page's query, run only when the form is `submitted` (or nothing has run for this
    database yet, or it did not exist yet); any other rerun — a widget elsewhere, a page switch — shows
    the last result again instead of querying the database once more."""
    last = st.session_state.get(key)
    if submitted or last is None or last[0] != db or (last[1].df is None and last[1].level == "info"):
        last = (db, query(db, sql, user=True))
        st.session_state[key] = last
    return last[1]


def chart(df: pd.DataFrame, key: str) -> None:
    """A plotly chart of the first column against the numeric ones (line for time, bars otherwise)."""
    import plotly.express as px

    if df.empty or df.shape[1] < 2:
        return
    x = df.columns[0]
    numeric = [c for c in df.columns[1:] if pd.api.types.is_numeric_dtype(df[c]) and not pd.api.types.is_bool_dtype(df[c])]
    if not numeric:
        return
    data = df.copy()
    if not pd.api.types.is_datetime64_any_dtype(data[x]):
        data[x] = data[x].astype(str)
        if df.shape[1] > 2 and not pd.api.types.is_numeric_dtype(df[df.columns[1]]):
            data[x] = df[df.columns[0]].astype(str) + " · " + df[df.columns[1]].astype(str)
        data[x] = data[x].map(plotly_text)
    data = data.rename(columns=lambda c: plotly_text(str(c)))
    x, numeric = plotly_text(str(x)), [plotly_text(str(c)) for c in numeric]
    if not pd.api.types.is_datetime64_any_dtype(data[x]):
        fig = px.bar(data, x=x, y=numeric[:6], barmode="group")
    else:
        fig = px.line(data, x=x, y=numeric[:6], markers=True)
    fig.update_layout(height=320, margin=dict(l=0, r=0, t=10, b=0), legend_title_text="")
    st.plotly_chart(fig, width="stretch", key=key)


def table(df: pd.DataFrame, name: str, key: str) -> None:
    st.dataframe(df, hide_index=True, width="stretch")
    st.download_button("Download CSV", df.to_csv(index=False).encode(), file_name=f"{name}.csv",
                       mime="text/csv", key=f"csv-{key}")
