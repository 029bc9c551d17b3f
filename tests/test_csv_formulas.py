"""Every CSV meant for a spreadsheet writes a cell that would start a formula as text (docs/security.md):
a visitor's question `=HYPERLINK(…)` in the doc-gap queue must not run when an analyst opens the file."""

from __future__ import annotations

import csv
import io

import pandas as pd
import pytest

from workbench.cli import main
from workbench.text import spreadsheet_cell
from workbench.ui.tables import csv_bytes

HOSTILE = ['=HYPERLINK("http://127.0.0.1/x","sourdough")', "+1+1 sourdough", "-2+3 sourdough",
           "@SUM(1) sourdough", "\tsourdough tab", "\rsourdough cr"]


@pytest.mark.parametrize("text", HOSTILE)
def test_a_formula_start_becomes_text_and_the_rest_is_kept(text):
    assert spreadsheet_cell(text) == "'" + text


@pytest.mark.parametrize("value", ["How do I bake sourdough?", "a=b", "", 3, -2.5, None, "'quoted"])
def test_everything_else_passes_unchanged(value):
    assert spreadsheet_cell(value) == value


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = tmp_path_factory.mktemp("csv") / "t.duckdb"
    for question in HOSTILE:  # off-topic for the demo corpus: each is a doc gap
        assert main(["ask", question, "--db", str(path)]) == 0
    return str(path)


def test_gaps_csv_neutralises_formula_cells(db, capsys):
    capsys.readouterr()
    assert main(["gaps", "--db", db, "--csv"]) == 0
    out = capsys.readouterr().out
    questions = [r["question"] for r in csv.DictReader(io.StringIO(out))]
    assert questions and all(q.startswith("'") for q in questions)
    assert {q[1:].strip() for q in questions} <= {h.strip() for h in HOSTILE}
    for row in csv.reader(io.StringIO(out)):
        assert not any(cell.startswith(("=", "+", "-", "@", "\t", "\r")) for cell in row)


def test_sql_csv_neutralises_formula_cells_and_headers(db, capsys):
    capsys.readouterr()
    assert main(["sql", "SELECT question AS \"=head\", 1 AS n FROM turns", "--db", db, "--csv"]) == 0
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows[0] == ["'=head", "n"]
    assert all(r[0].startswith("'") and r[1] == "1" for r in rows[1:])


def test_the_apps_csv_download_neutralises_formula_cells():
    df = pd.DataFrame({"question": HOSTILE + ["plain"], "=asks": list(range(len(HOSTILE) + 1))})
    back = pd.read_csv(io.BytesIO(csv_bytes(df)), keep_default_na=False)
    assert list(back.columns) == ["question", "'=asks"]
    assert list(back["question"])[:-1] == ["'" + h for h in HOSTILE[:-2]] + ["'\tsourdough tab", "'\rsourdough cr"]
    assert list(back["question"])[-1] == "plain" and list(back["'=asks"]) == list(range(len(HOSTILE) + 1))
