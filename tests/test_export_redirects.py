"""The OTLP export and the Phoenix annotations follow no redirect either: a collector that answers 307 cannot
send the turns (questions, answers, corpus text) on to another server (docs/security.md, "Redirects")."""

from __future__ import annotations

import pytest

from loopback import RedirectServer, ScriptedServer
from otlp_collector import Collector
from workbench.cli import main
from workbench.session import Session


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    db = tmp_path_factory.mktemp("redirects") / "t.duckdb"
    Session.open(trace_db=db).ask("How do I configure SSO?")
    return db


@pytest.mark.parametrize("code", [302, 307, 308])
def test_an_otlp_export_is_not_redirected(traced, code, capsys):
    with Collector() as b, RedirectServer(b.url.removesuffix("/v1/traces"), code) as a:
        rc = main(["export", "--openinference", "--endpoint", a.url + "/v1/traces", "--timeout", "2",
                   "--db", str(traced)])
    err = capsys.readouterr().err
    assert rc == 2 and "OTLP export to" in err and "failed" in err, err
    assert b.requests == 0 and b.spans == []  # nothing reached the other server
    assert a.requests


@pytest.mark.parametrize("code", [302, 307])  # urllib alone refuses a POST's 307 but follows a 302 as a GET
def test_phoenix_annotations_are_not_redirected(traced, code):
    from workbench.trace.openinference import ExportError, annotate_phoenix, batches
    from workbench.trace.spans import stored_turns

    turns = [pair for group in batches(stored_turns(traced)) for pair in group]
    with ScriptedServer([], repeat_last=True) as b, RedirectServer(b.url, code) as a:
        with pytest.raises(ExportError, match=rf"\({code}\)"):
            annotate_phoenix(turns, a.url, timeout=5)
    assert b.requests == [] and len(a.requests) == 1
