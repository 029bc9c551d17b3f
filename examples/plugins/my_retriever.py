# examples/plugins/my_retriever.py
from workbench.retrieval import Retriever, register_retriever
from workbench.text import content_terms
from workbench.types import Chunk, Hit


class TitleMatch(Retriever):
    """Whole documents, ranked by how many of the query's content words their title contains."""

    name = "titles"

    def __init__(self, corpus):
        super().__init__([Chunk(d.doc_id, 0, d.text, chunk_type=d.kind, artifact_kind=d.artifact_kind)
                          for d in corpus.documents])
        self.titles = [set(content_terms(d.title)) for d in corpus.documents]

    def _retrieve(self, query, k):
        terms = set(content_terms(query))
        scored = sorted(((len(terms & t), i) for i, t in enumerate(self.titles)), key=lambda s: (-s[0], s[1]))
        matches = [(score, i) for score, i in scored[:k] if score > 0]
        return [Hit(self.chunks[i], float(score), rank) for rank, (score, i) in enumerate(matches, start=1)]


@register_retriever("titles")
def build(corpus, cache_dir=None, **options):
    return TitleMatch(corpus)
