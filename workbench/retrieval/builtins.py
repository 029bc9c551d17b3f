"""Built-in retrievers register through the same hook an outside one would."""

from __future__ import annotations

from .base import register_retriever
from .bm25 import build_bm25

register_retriever("bm25", build_bm25)
