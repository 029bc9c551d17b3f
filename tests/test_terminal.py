"""CLI output neutralises terminal control characters from documents and questions (issue 17,
item 7): escape sequences (CSI, OSC 52 clipboard writes, DCS), C1 controls, carriage returns and
bidi overrides are printed as visible escapes; `--json` and `--csv` keep the data as it is."""

from __future__ import annotations

import csv
import io
import json

import pytest

from clirun import cli as run_cli
from workbench.terminal import neutralize

OSC52 = "\x1b]52;c;ZXZpbA==\x07"  # writes "evil" to the clipboard
HOSTILE = OSC52 + "\x1b[2J\x1b[31m" + "\x1bP1$r\x1b\\" + "\x9b2J" + "\x9d0;title\x9c" + "\u202e" + "\u2066" + "\r" + "\x08\x7f"
RAW = ["\x1b", "\x07", "\x9b", "\x9d", "\x9c", "\u202e", "\u2066", "\r", "\x08", "\x7f"]


def _has_raw(text: str) -> list[str]:
    return [repr(c) for c in RAW if c in text]


def cli(*args, stdin: str | None = None):
    r = run_cli(*args, input=stdin)
    return r.returncode, r.stdout, r.stderr


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    d = tmp_path_factory.mktemp("ctl")
    f = d / "kb.jsonl"
    f.write_text(json.dumps({"id": "widget" + HOSTILE, "title": "Calibrate the widget " + HOSTILE,
                             "url": "https://help.example.test/widget",
                             "text": f"To calibrate the flux widget press calibrate twice. {HOSTILE} It takes two minutes."})
                 + "\n", encoding="utf-8")
    return f


@pytest.fixture(scope="module")
def db(tmp_path_factory, corpus):
    path = tmp_path_factory.mktemp("db") / "t.duckdb"
    code, _, err = cli("ask", f"How do I calibrate the flux widget? {HOSTILE}", "--corpus", str(corpus), "--db", str(path))
    assert code == 0, err
    # a doc-gap question (its control characters hold no word the document has)
    code, _, err = cli("ask", "How do I bake sourdough bread?\x1b[H\x9bK\u202e\r", "--corpus", str(corpus),
                       "--db", str(path))
    assert code == 0, err
    return path


def test_neutralize_makes_every_control_visible_and_keeps_text():
    out = neutralize("ok\ttab\nline " + HOSTILE + " é 中文 emoji 🙂")
    assert _has_raw(out) == []
    assert "ok\ttab\nline " in out and "é 中文 emoji 🙂" in out
    assert "\\x1b]52;c;ZXZpbA==\\x07" in out and "\\x9b" in out and "\\u202e" in out and "\\r" in out
    assert neutralize("a\r\nb") == "a\nb", "a Windows line end is a line end"


def test_ask_prints_no_raw_control_characters(corpus):
    """Before the fix `ask` printed the OSC 52 sequence (and the rest) straight to the terminal."""
    code, out, err = cli("ask", f"How do I calibrate the flux widget? {HOSTILE}", "--corpus", str(corpus), "--no-trace")
    assert code == 0, err
    assert _has_raw(out) == [] and _has_raw(err) == []
    assert "\\x1b]52;c;ZXZpbA==\\x07" in out, "the sequence is shown, defused"
    code, out, err = cli("ask", f"x{HOSTILE}", "--corpus", str(corpus), "--no-trace", "--mode", "excerpts")
    assert _has_raw(out) == [] and _has_raw(err) == []


def test_ask_json_keeps_the_data(corpus):
    code, out, _ = cli("ask", "How do I calibrate the flux widget?", "--corpus", str(corpus), "--no-trace", "--json")
    payload = json.loads(out)
    assert OSC52 in payload["answer"] and "\u202e" in payload["sources"][0]["title"]


def test_sql_and_gaps_tables_are_neutralised_csv_and_json_keep_the_data(db):
    for args in (("sql", "SELECT question, answer FROM turns"), ("gaps",)):
        code, out, err = cli(*args, "--db", str(db))
        assert code == 0, err
        assert _has_raw(out) == [] and "\\x1b" in out
        code, out, _ = cli(*args, "--db", str(db), "--csv")
        rows = list(csv.reader(io.StringIO(out, newline="")))
        assert any("\x1b[" in cell and "\u202e" in cell for row in rows for cell in row)
        code, out, _ = cli(*args, "--db", str(db), "--json")
        values = [v for line in out.splitlines() for v in json.loads(line).values() if isinstance(v, str)]
        assert any("\x1b[" in v and "\u202e" in v and "\r" in v for v in values)


def test_errors_warnings_and_other_commands_are_neutralised(corpus, tmp_path):
    bad = tmp_path / f"bad{HOSTILE.replace('/', '')}.md"
    bad.write_text("no front matter")
    code, out, err = cli("ask", "q", "--corpus", str(bad))
    assert code == 2 and err.startswith("error:") and _has_raw(err) == []
    q = tmp_path / "q.jsonl"
    q.write_text(json.dumps({"id": "q" + HOSTILE, "question": "calibrate the flux widget"}) + "\n")
    code, out, err = cli("retrieve", "--corpus", str(corpus), "--queries", str(q))
    assert code == 0 and _has_raw(out) == [] and "\\x1b" in out, err
    j = tmp_path / "j.jsonl"
    j.write_text(json.dumps({"id": "c" + HOSTILE, "claim": "press calibrate", "evidence": ["press calibrate"]}) + "\n")
    code, out, err = cli("judge", str(j))
    assert code == 0 and _has_raw(out) == [] and "\\x1b" in out, err
    code, out, _ = cli("judge", str(j), "--json")
    assert json.loads(out)["id"] == "c" + HOSTILE
