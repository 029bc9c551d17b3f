"""Refactors keep behaviour: the demo questions' payload JSON and trace rows are what they were on main
(`tests/demo_snapshot.py` wrote the snapshot; ids, times and latencies named by role, nothing else)."""

from __future__ import annotations

import json

from demo_snapshot import SNAPSHOT, snapshot
from tracedb import empty_trace_db


def test_demo_payloads_and_trace_rows_are_unchanged(tmp_path):
    want = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    got = snapshot(empty_trace_db(tmp_path / "trace.duckdb"))
    assert len(got["payloads"]) == len(want["payloads"])
    for i, (g, w) in enumerate(zip(got["payloads"], want["payloads"])):
        assert json.dumps(g, ensure_ascii=False) == json.dumps(w, ensure_ascii=False), f"payload {i}"
    assert set(want["rows"]) <= set(got["rows"])  # no table of the snapshot is gone
    # a table added since the snapshot was taken holds nothing the demo questions write
    assert {t: rows for t, rows in got["rows"].items() if t not in want["rows"] and rows} == {}
    for table in want["rows"]:
        if table == "migrations":  # migrations added since the snapshot are applied too
            assert set(want["rows"][table]) <= set(got["rows"][table])
        else:
            assert got["rows"][table] == want["rows"][table], table
