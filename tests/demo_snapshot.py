"""The payload JSON and trace rows of the demo questions, with what differs run to run named by role.

Run as a script to write the snapshot `tests/data/demo_snapshot.json` (done once on main before a refactor);
`tests/test_demo_snapshot.py` asks the same questions and compares. What is not content is replaced: turn and
run ids (random) by their order of appearance, times and latencies by a mark. Everything else — every payload
key and value, every row of every trace table — must stay byte-identical.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SNAPSHOT = HERE / "data" / "demo_snapshot.json"
GOLD = HERE.parent / "data" / "demo_gold.jsonl"
FOLLOWUPS = HERE.parent / "data" / "demo_followups.jsonl"
#: A sample of the demo questions: each mode, each retriever of the demo, a verified turn, a conversation.
ASKS = [
    ({}, slice(0, 12)),
    ({"mode": "excerpts"}, slice(0, 8)),
    ({"judge": None, "faults": ["corrupt_id"]}, slice(0, 3)),
    ({"verify": True, "verify_budget": 3}, slice(0, 2)),
]
_HEX = re.compile(r"\b[0-9a-f]{32}\b")
_VOLATILE = re.compile(r'("(?:latency_ms|model_latency_ms|rerun_ms_per_turn)": )-?[0-9.e+-]+')
_TIME_COLUMNS = ("started_at", "created_at", "added_at", "verified_at", "recorded_at", "latency_ms",
                 "model_latency_ms", "written_at", "applied_at")


def _questions(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def ask_all(trace_db: Path) -> list[dict]:
    """Ask the sample into `trace_db` with the offline provider; each answer's payload JSON."""
    from workbench.session import Conversations, Session

    session = Session.open(trace_db=trace_db)
    gold = _questions(GOLD)
    out = []
    for kwargs, part in ASKS:
        for q in gold[part]:
            out.append(session.ask(q["question"], run_id=f"run-{len(out) // 100}", **kwargs).payload.to_json())
    talks = Conversations(session)
    for i, q in enumerate(_questions(FOLLOWUPS)[:8]):
        cid = q.get("conversation") or f"c-{i}"
        out.append(talks.ask(q["question"], cid, run_id="run-c").payload.to_json())
    return out


def rows(trace_db: Path) -> dict[str, list]:
    """Every row of every base table of `trace_db`, sorted, volatile columns marked."""
    import duckdb

    con = duckdb.connect(str(trace_db), read_only=True)
    try:
        tables = [r[0] for r in con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_type = 'BASE TABLE' "
            "ORDER BY table_name").fetchall()]
        out = {}
        for t in tables:
            cur = con.execute(f'SELECT * FROM "{t}"')
            names = [d[0] for d in cur.description]
            got = []
            for r in cur.fetchall():
                got.append({n: ("<volatile>" if n in _TIME_COLUMNS and v is not None else v)
                            for n, v in zip(names, r)})
            out[t] = got
        return out
    finally:
        con.close()


def normalized(payloads: list[dict], table_rows: dict[str, list]) -> dict:
    """Both as one JSON value, ids by order of first appearance in the payloads, then in the rows."""
    text = json.dumps({"payloads": payloads}, ensure_ascii=False, default=str)
    rows_text = json.dumps(table_rows, ensure_ascii=False, default=str, sort_keys=True)
    ids: dict[str, str] = {}
    for m in _HEX.finditer(text + rows_text):
        ids.setdefault(m.group(0), f"<id{len(ids)}>")

    def clean(s: str) -> str:
        s = _HEX.sub(lambda m: ids[m.group(0)], s)
        return _VOLATILE.sub(r'\1"<volatile>"', s)

    data = json.loads(clean(text))
    data["rows"] = {t: sorted((json.dumps(r, ensure_ascii=False, sort_keys=True) for r in rs))
                    for t, rs in json.loads(clean(rows_text)).items()}
    # a payload stored as text in a row (turn_payloads) carries latencies too
    data["rows"] = {t: [_VOLATILE.sub(r'\1"<volatile>"', r.replace('\\"', '"')) for r in rs]
                    for t, rs in data["rows"].items()}
    return data


def snapshot(trace_db: Path) -> dict:
    payloads = ask_all(trace_db)
    return normalized(payloads, rows(trace_db))


if __name__ == "__main__":
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["WORKBENCH_HOME"] = tmp
        data = snapshot(Path(tmp) / "trace.duckdb")
    SNAPSHOT.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {SNAPSHOT}: {len(data['payloads'])} payloads, "
          f"{sum(len(r) for r in data['rows'].values())} rows", file=sys.stderr)
