"""Helpers for the app under Streamlit's AppTest (the `app` fixture itself is in conftest.py)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from conftest import ROOT

if TYPE_CHECKING:  # the render tests import `unescape` without loading Streamlit's test harness
    from streamlit.testing.v1 import AppTest

APP = str(ROOT / "app.py")


def ask(at: AppTest, question: str) -> AppTest:
    """Type `question` into the chat input and rerun; the page must not raise."""
    at.chat_input[0].set_value(question).run()
    assert not at.exception, at.exception
    return at


def unescape(md: str) -> str:
    """The text a markdown renderer shows for escaped markdown: backslash escapes resolved."""
    return re.sub(r"\\(.)", r"\1", md)


def texts(at: AppTest) -> str:
    return "\n".join(m.value for m in at.markdown)
