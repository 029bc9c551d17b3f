"""A retriever with some documents withheld: what a verification re-run searches (docs/design.md §9).

`Withholding(base, doc_ids)` is a view, not a new index: every query goes to `base` (the loaded index,
untouched, nothing rebuilt or cached), and the withheld documents' chunks are dropped from what it
returns, the remaining hits renumbered 1, 2, 3 … So a withheld document's chunks are never returned,
and the rest rank in the same order as in `base`, as if the withheld chunks were not in the corpus.

Exactly `k` remaining hits whenever the corpus has them: the view asks `base` for `k` plus as many
hits as the withheld documents have chunks, the most the withheld ones can take of any ranking.

**Approximation.** Scores are `base`'s, computed over the whole corpus: BM25's term statistics
(document frequencies, average chunk length) and hybrid fusion's min-max normalisation still count
the withheld chunks. Rebuilding the index without them would cost a full index build per withheld
document; with one or a few documents out of hundreds the statistics barely move, and the order of
the remaining chunks is what the model sees. Scores of the remaining hits are reported as `base`
gave them.
"""

from __future__ import annotations

from typing import Iterable

from ..types import Hit
from .base import Retriever


class Withholding(Retriever):
    """`base` with the chunks of `doc_ids` never returned (see the module docstring)."""

    def __init__(self, base: Retriever, doc_ids: Iterable[str]):
        self.base = base
        self.withheld = frozenset(doc_ids)
        self.name = base.name
        kept = [c for c in base.chunks if c.doc_id not in self.withheld]
        self._hidden = len(base.chunks) - len(kept)  # the most withheld chunks any ranking can hold
        super().__init__(kept)

    def _retrieve(self, query: str, k: int) -> list[Hit]:
        hits = self.base.retrieve(query, k + self._hidden).hits
        kept = [h for h in hits if h.chunk.doc_id not in self.withheld][:k]
        return [Hit(h.chunk, h.score, rank) for rank, h in enumerate(kept, start=1)]
