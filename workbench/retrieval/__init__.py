"""Retrieval: the only package that imports llama-index."""

from .base import Retrieval, Retriever, get_retriever, register_retriever, retriever_names

__all__ = ["Retrieval", "Retriever", "get_retriever", "register_retriever", "retriever_names"]
