"""Document usage over runs: turns in which each document was retrieved, consulted and cited (views
`doc_usage` / `doc_usage_totals`, through `trace.usage`, which the CLI's `usage` and the app call too)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import pandas as pd

from ..config import DEMO_CORPUS
from ..corpus import Corpus, load_corpus


def as_frame(result: tuple[list[str], list[tuple]]) -> pd.DataFrame:
    """(columns, rows), as `trace.usage` returns them, as a DataFrame."""
    columns, rows = result
    return pd.DataFrame(rows, columns=columns)


def document_usage(db: str | Path, run_ids: Sequence[str] | None = None,
                   corpus_ids: Sequence[str] | None = None) -> pd.DataFrame:
    """One row per document and corpus: turns in which it was retrieved, consulted, cited after reading and
    linked from a listing (view `doc_usage`)."""
    from ..trace import usage

    return as_frame(usage.doc_usage(db, run_ids, corpus_ids))


def usage_totals(db: str | Path, corpus: Any = None, run_ids: Sequence[str] | None = None) -> pd.DataFrame:
    """Totals per corpus category (when `corpus` is given: a path or a loaded corpus), else per kind."""
    from ..trace import usage

    return as_frame(usage.usage_totals(db, run_ids, corpus_of(corpus) if corpus is not None else None))


def retrieved_not_consulted(db: str | Path, run_ids: Sequence[str] | None = None, min_turns: int = 2) -> pd.DataFrame:
    """Documents retrieved in at least `min_turns` turns and never consulted."""
    from ..trace import usage

    return as_frame(usage.retrieved_not_consulted(db, run_ids, min_turns))


def never_retrieved(db: str | Path, corpus: Any = None, run_ids: Sequence[str] | None = None) -> pd.DataFrame:
    """Documents of `corpus` (default: the demo corpus) that no turn retrieved."""
    from ..trace import usage

    return as_frame(usage.never_retrieved(db, corpus_of(corpus), run_ids))


def corpus_of(corpus: Any):
    """`corpus` loaded (a path), as is (a loaded corpus), or the demo corpus (None)."""

    return corpus if isinstance(corpus, Corpus) else load_corpus(corpus or DEMO_CORPUS)
