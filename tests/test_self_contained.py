"""A user's clone is the whole project: nothing user-facing sends them to a file it does not have.

The README, docs, CLI help, app, notebooks and error messages explain the design in the project's
own words (docs/design.md) and never point at `../shared` (the development machine's folder of
third-party benchmark data and design notes) or at a DESIGN.md outside the repository. Benchmarks
and tests may say where the optional data lives; they are not scanned.
"""

from __future__ import annotations

import re

import nbformat

from conftest import ROOT

OUTSIDE = re.compile(r"\.\./shared|(?<!docs/)\bDESIGN\.md|\bDESIGN §")


def _user_facing():
    yield from (ROOT / "README.md", ROOT / "app.py")
    yield from sorted((ROOT / "docs").glob("*.md"))
    yield from sorted((ROOT / "pages").glob("*.py"))
    yield from sorted((ROOT / "workbench").rglob("*.py"))
    yield from sorted((ROOT / "workbench").rglob("*.json"))
    yield from sorted((ROOT / "workbench").rglob("*.md"))


def test_nothing_user_facing_points_outside_the_repository():
    bad = []
    for path in _user_facing():
        text = path.read_text(encoding="utf-8")
        if path.name == "schema_m001.py":  # shipped migrations are never edited; m005 re-comments what m001 said
            continue
        bad += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in OUTSIDE.finditer(text)]
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for cell in nbformat.read(path, as_version=4).cells:
            bad += [f"{path.relative_to(ROOT)}: {m.group(0)}" for m in OUTSIDE.finditer(cell.source)]
    assert not bad, bad


def test_the_design_doc_explains_the_sets_the_payload_and_the_turn_record():
    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    for section in ("## 1. Three sets per turn", "## 2. The sources payload", "## 4. The turn record"):
        assert section in design
    for word in ("retrieved", "cited", "consulted", "exposure", "rejected", "`consulted` is *not* `false`",
                 "schema_version", "rejected_citations", "tool_calls", "excerpts"):
        assert word in design, word
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "(docs/design.md)" in readme and "(docs/plugins.md)" in readme
    # every "docs/design.md §N" the code cites exists
    cited = {int(n) for p in (ROOT / "workbench").rglob("*.py")
             for n in re.findall(r"docs/design\.md §(\d+)", p.read_text(encoding="utf-8"))}
    assert cited and all(f"## {n}. " in design for n in cited), sorted(cited)


def test_optional_data_is_looked_for_where_the_user_says(tmp_path, monkeypatch):
    from workbench import analysis as A
    from workbench.config import benchmark_data_dir

    monkeypatch.setenv("WORKBENCH_BENCHMARK_DATA", str(tmp_path))
    assert benchmark_data_dir() == tmp_path
    assert A.question_set().name == "demo"
    (tmp_path / "arduino-help-center").mkdir()
    (tmp_path / "arduino-help-center" / "corpus.jsonl").write_text("{}\n")
    assert A.question_set().name == "arduino"
    assert A.expertqa_path() == tmp_path / "expertqa" / "claims.jsonl"
    status = A.expertqa_status(A.expertqa_path())
    assert status.startswith("SKIP: ExpertQA claims not found") and "WORKBENCH_BENCHMARK_DATA" in status
