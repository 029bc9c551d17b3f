"""What the app loads once and shares between reruns, pages and sessions (Streamlit's caches): providers' labels,
models and capabilities; corpora; sessions with their built index."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import streamlit as st

from ..config import default_db_path
from ..corpus import Corpus, load_corpus
from ..providers import declared, get_provider, steps
from ..session import Session
from .uploads import max_documents, max_pdf_content_bytes


@st.cache_data(show_spinner=False, ttl=300)
def provider_info(name: str) -> dict[str, Any]:
    """Label and models of a provider; an error message instead of an exception."""
    try:
        p = get_provider(name)
    except Exception as exc:  # noqa: BLE001 - any provider failure is shown, never raised
        return {"label": name, "models": [], "error": str(exc)}
    info: dict[str, Any] = {"label": provider_display(name), "models": [], "error": None}
    try:
        info["models"] = list(p.list_models())
    except Exception as exc:  # noqa: BLE001
        info["error"] = f"cannot list models: {exc}"
    return info


@st.cache_data(show_spinner=False)
def provider_caps(name: str) -> dict[str, Any]:
    """What the pickers read from a provider's declarations (the tool protocols its capabilities allow, its
    default one) and the label of its default model."""
    protocols = steps.supported_protocols(name)
    try:
        p = get_provider(name)
        model, model_label = p.model, p.model_label
    except Exception:  # noqa: BLE001 - the picker still lists it; choosing it shows the error
        model = model_label = None
    return {"protocols": protocols or [steps.NATIVE], "default_protocol": declared(name, "default_tool_protocol"),
            "model": model, "model_label": model_label}


@st.cache_data(show_spinner=False)
def provider_display(name: str) -> str:
    """A provider's label ("offline (no LLM)"); constructing a provider touches no network."""
    try:
        label = getattr(get_provider(name), "label", name)
    except Exception:  # noqa: BLE001 - the picker still lists it; choosing it shows the error
        return name
    return label if label and label != "base" else name


def _fingerprint(path: str) -> str:
    """Changes when the corpus files change, so an edited folder gets a fresh session: how many files, and the latest
    modification time of any (every file under a folder, as `Path.rglob("*")` finds them: symlinked folders not
    entered). Read with `os.scandir` (what rglob does, without a `Path` per entry): it runs on every script run."""
    p = Path(path)
    try:
        if p.is_file():
            return f"1:{p.stat().st_mtime_ns}"
        count, latest = _files_under(path) if p.is_dir() else (0, 0)
        return f"{count}:{latest}"
    except OSError:
        return "missing"


def _files_under(folder: str) -> tuple[int, int]:
    """(number of files, latest st_mtime_ns) under `folder`, recursively; an unreadable folder counts as empty."""
    count = latest = 0
    try:
        with os.scandir(folder) as it:
            entries = list(it)
    except PermissionError:
        return 0, 0
    for e in entries:
        if e.is_dir(follow_symlinks=False):
            n, t = _files_under(e.path)
            count, latest = count + n, max(latest, t)
        elif e.is_file():
            count, latest = count + 1, max(latest, e.stat().st_mtime_ns)
    return count, latest


def load_app_corpus(path: str) -> Corpus:
    """A corpus for the app: at most `WORKBENCH_MAX_DOCUMENTS` documents and `WORKBENCH_MAX_PDF_MB` of PDF
    page content in all (docs/security.md)."""
    return load_corpus(path, max_documents=max_documents(), pdf_content_bytes=max_pdf_content_bytes())


@st.cache_resource(show_spinner="Loading the corpus…", max_entries=16)
def _cached_corpus(path: str, fingerprint: str, limits: tuple[int, int]) -> Corpus:
    return load_app_corpus(path)


def _limits() -> tuple[int, int]:
    return max_documents(), max_pdf_content_bytes()  # in the key: a corpus loaded under other limits is not reused


def app_corpus(path: str) -> Corpus:
    """The corpus at `path`, loaded once per version of its files and shared by every page and session."""
    return _cached_corpus(path, _fingerprint(path), _limits())


@st.cache_resource(show_spinner="Loading the corpus and building its index…", max_entries=16)
def _cached_session(corpus: str, retriever: str, fingerprint: str, db: str | None) -> Session:
    session = Session.open(_cached_corpus(corpus, fingerprint, _limits()), retriever=retriever, trace_db=db)
    session.toolbox  # build (or load) the index now, not during the first question
    return session


def get_session(corpus: str, retriever: str, db: str | None = None) -> Session:
    """One cached session per (corpus files, retriever, trace database): turns reuse the loaded index."""
    return _cached_session(corpus, retriever, _fingerprint(corpus), db or str(default_db_path()))
