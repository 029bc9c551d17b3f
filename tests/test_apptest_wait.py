"""The tests' wait for an AppTest run (tests/conftest.py, `_wait_for_the_run`) is Streamlit's, on a condition:
a run is waited for until it is over, and one over its timeout fails with Streamlit's own error."""

from __future__ import annotations

import time

import pytest
from streamlit.testing.v1 import AppTest
from streamlit.testing.v1 import local_script_runner

import conftest


def _script(pause: float) -> str:
    return f"import time\nimport streamlit as st\ntime.sleep({pause})\nst.write('done')\n"


def test_a_run_is_waited_for_until_it_is_over():
    assert local_script_runner.require_widgets_deltas is conftest._wait_for_the_run
    start = time.monotonic()
    at = AppTest.from_string(_script(0.3), default_timeout=30).run()
    assert time.monotonic() - start >= 0.3 and not at.exception
    assert [m.value for m in at.markdown] == ["done"]


def test_a_run_over_its_timeout_fails_with_streamlits_error():
    with pytest.raises(RuntimeError, match=r"AppTest script run timed out after 0.2\(s\)"):
        AppTest.from_string(_script(2), default_timeout=0.2).run()
