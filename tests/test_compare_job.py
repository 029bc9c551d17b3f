"""The Compare page's job when two script runs of one session work it at once (workbench/ui/compare.py).

With Streamlit's `runner.fastReruns` (its default) a click starts the new script run at once, while the old run
stops only at its next Streamlit call: for up to a poll (`POLL_SECONDS`) both wait on the running column's future.
A CI run cancelled while column C ran; C finished inside that window, both runs recorded it, the job had four
columns of four and the page never said "Cancelled: 3 of 4 columns ran; not run: D." (the browser test,
tests/test_browser.py, timed out). Here two real threads run `advance` on one job, outside a script run (Streamlit's
bare mode: its calls draw nothing)."""

from __future__ import annotations

import threading
from concurrent.futures import Future

import streamlit as st

from workbench.ui import compare
from workbench.ui.records import RunConfig, Turn


class _Watched(Future):
    """A future that says each time someone starts waiting on it."""

    def __init__(self):
        super().__init__()
        self.waiting = threading.Semaphore(0)

    def result(self, timeout=None):
        self.waiting.release()
        return super().result(timeout)


def test_two_runs_waiting_on_the_running_column_record_it_once_and_a_cancel_shows_what_did_not_run():
    question, cfg = "How do I configure SSO?", RunConfig()
    running = _Watched()
    job = compare.Job(question, [cfg] * 4, columns=[[Turn(question, cfg)], [Turn(question, cfg)]], cancelled=True,
                      running=running)
    st.session_state[compare.JOB] = job
    failures: list[BaseException] = []

    def script_run():
        try:
            compare.advance()
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            failures.append(exc)

    runs = [threading.Thread(target=script_run) for _ in range(2)]
    try:
        for t in runs:
            t.start()
        for _ in runs:  # both runs wait on column C
            assert running.waiting.acquire(timeout=30), "a script run never waited on the running column"
        running.set_result([Turn(question, cfg)])  # C finishes
        for t in runs:
            t.join(30)
        assert not failures, failures
        assert len(job.columns) == 3, f"column C recorded {len(job.columns) - 2} times"
        assert job.finished and job.running is None
        assert len(st.session_state["cmp_conversations"]) == 3
    finally:
        st.session_state.pop(compare.JOB, None)
        st.session_state.pop("cmp_conversations", None)
        st.session_state.pop("cmp_turns", None)
