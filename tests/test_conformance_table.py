"""The conformance suite's results live in files of their own (tests/conformance_table.py `RESULTS`), not in
pytest's cache: the table generator reads what the suite wrote, whatever plugins the run had
(`-p no:cacheprovider`), and a cell the run did not reach reads "not run"."""

from __future__ import annotations

import conformance_table as ct


def test_results_written_by_the_suite_are_what_the_table_reads(tmp_path, monkeypatch):
    monkeypatch.setattr(ct, "RESULTS", tmp_path / "results")
    ct.save_result("langchain_agent_text --json", {"turn": [], "hidden": []})
    ct.save_result("openai_chat", {"turn": ["cited: got set(), expected {'a'}"], "hidden": []})
    got = ct.results()
    assert got == {"langchain_agent_text --json": {"turn": [], "hidden": []},
                   "openai_chat": {"turn": ["cited: got set(), expected {'a'}"], "hidden": []}}
    rows = {line.split(" | ")[0].lstrip("| "): line for line in ct.table({}, got).splitlines()[2:]}
    assert "| passes |" in rows["LangChain v1 `create_agent`, JSON search results"]
    assert "| fails — turn: cited |" in rows["openai client, chat completions"]
    assert "| not run |" in rows["openai client, Responses API"]
    assert not list((tmp_path / "results").glob("*.part"))  # written whole, then renamed
