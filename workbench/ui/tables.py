"""Query results as a table, a plotly chart and a CSV download (trace explorer and doc-gap queue)."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from ..errors import WorkbenchError
from ..render import escape_markdown, plotly_text


def read(db: str | None, sql: str, *, user: bool) -> pd.DataFrame | None:
    """Run `sql` read-only on the trace database; a message (never a traceback) when it fails."""
    try:
        from ..trace import TraceReader
    except ImportError as exc:  # the trace store is an optional layer for the app
        st.info(f"The trace store is not available yet ({exc}).")
        return None
    from ..config import default_db_path
    from ..errors import ReadOnlyQueryError

    reader = TraceReader(db or default_db_path())
    if not reader.path.exists():
        st.info(escape_markdown(f"No trace database at {reader.path} yet: ask a question on the chat page "
                                "(every turn is traced) or run `workbench ask …`."))
        return None
    try:
        columns, rows = reader.user_query(sql, files=False) if user else reader.rows(sql)
    except ReadOnlyQueryError as exc:
        st.error(escape_markdown(str(exc)), icon="🛑")
        return None
    except WorkbenchError as exc:
        st.error(escape_markdown(str(exc)), icon="⚠️")
        return None
    return pd.DataFrame(rows, columns=columns)


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
