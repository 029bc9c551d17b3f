"""The stored rows of an audit, to compare two versions of the write path byte for byte (issue 38 item 9).

    .venv/bin/python benchmarks/audit_rows_dump.py ROOT OUT

With the code at ROOT (a checkout: main, or this branch), 300 benchmark traces (benchmarks/audit_ingest.py) through
collect's path (`Assembler.receive_request`, the file kept) and the traces of tests/test_audit_secrets.py (every secret;
one more with a NUL, quotes, a backslash, an emoji and U+2028) through that path and through `workbench ingest`; the
rows of turn_payloads, turns, sources, retrieved_items, citations, tool_calls, audit_spans and model_calls written to
OUT, sorted, run ids replaced by their rank. Two versions store the same rows when their OUT files are identical
(`cmp`); benchmarks/README.md, third round."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(sys.argv[1])
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks"), str(ROOT / "tests")]
from workbench.trace.connect import duckdb_connect  # noqa: E402
from audit_collect import bodies  # noqa: E402
from workbench.audit.collector import Assembler, KEEP_HOLD_S, KEEP_IDLE_S  # noqa: E402
from workbench.audit.spans import parse_request  # noqa: E402
from workbench.audit.units import Resolver  # noqa: E402
from workbench.trace.writer import TraceWriter  # noqa: E402
import test_audit_secrets as S  # noqa: E402
from clirun import cli  # noqa: E402

TABLES = ["turn_payloads", "turns", "sources", "retrieved_items", "citations", "tool_calls", "audit_spans", "model_calls"]
secret_reqs = [S._request("1" * 32, S._message_with_secrets(), S._hits(f" Admin token: {S.META_TOKEN}"), S._secret_attributes()),
               S._request("2" * 32, S.QUESTION, '[{"doc_id":"payroll",  "snippet":"' + S.KB + '\\u00e9", "max_tokens": 3}]'),
               S._request("3" * 32, f"{S.QUESTION} Use `Authorization: {S.BASIC}` and the key {S.ANTHROPIC}.", S._hits(), S._secret_attributes()),
               S._request("4" * 32, "What's \x00 the \\ key \U0001F600 \u2028 \"q\" ''?", S._hits("\x00 it's \\n"))]


def dump(db: Path, out) -> None:
    """The tables' rows of `db`, sorted, run ids replaced by their rank."""
    with duckdb_connect(db, read_only=True) as con:
        runs = [r for (r,) in con.execute("SELECT run_id FROM runs ORDER BY run_id").fetchall()]
        for t in TABLES:
            rows = con.execute(f'SELECT * FROM "{t}"').fetchall()
            cols = [d[0] for d in con.description]
            text = sorted(repr(r) for r in rows)
            for k, r in enumerate(runs):
                text = [x.replace(r, f"RUN{k}") for x in text]
            out.write(f"== {t} {cols} {len(rows)}\n" + "".join(x + "\n" for x in text))


def main() -> None:
    with open(sys.argv[2], "w") as out, tempfile.TemporaryDirectory() as tmp:
        data, _ = bodies(300, 50)
        a = Assembler(TraceWriter(Path(tmp) / "c.duckdb"), Resolver(None), name="bench")
        with a.writer.kept(idle_s=KEEP_IDLE_S, hold_s=KEEP_HOLD_S):
            for body in data:
                a.receive_request(parse_request(body, "application/x-protobuf"))
            for r in secret_reqs:
                a.receive_request(parse_request(r.encode(), "application/json"))
        out.write("### collect\n")
        dump(Path(tmp) / "c.duckdb", out)
        f = Path(tmp) / "spans.jsonl"
        f.write_text("".join(x + "\n" for x in secret_reqs))
        r = cli("ingest", f, "--db", Path(tmp) / "i.duckdb", "--name", "kb-audit")
        assert r.returncode == 0, r.stderr
        out.write("### ingest\n")
        dump(Path(tmp) / "i.duckdb", out)


if __name__ == "__main__":
    main()
