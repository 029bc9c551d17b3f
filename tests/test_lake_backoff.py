"""The one retry rule of a team store (`lake.Backoff`): a write that lost to another writer's commit is rolled back
and run again at most `tries` times; any other failure, and the last loss, reach the caller."""

from __future__ import annotations

import duckdb
import pytest

from workbench.trace import lake

QUICK = lake.Backoff(tries=3, first=0.0001, growth=2.0, cap=0.001)


def _step(failures: list[Exception]):
    calls = []

    def step():
        calls.append(1)
        if failures:
            raise failures.pop(0)
        return "written"
    return step, calls


def test_a_lost_write_is_run_again_until_it_commits():
    lost = duckdb.TransactionException(f"TransactionContext Error: {lake.LOST_COMMIT}: another writer")
    step, calls = _step([lost, lost, lost])
    assert lake.again_when_lost(duckdb.connect(), step, QUICK) == "written"
    assert len(calls) == 4


def test_the_last_loss_and_any_other_error_reach_the_caller():
    lost = duckdb.TransactionException(f"{lake.LOST_COMMIT}")
    step, calls = _step([lost] * 5)
    with pytest.raises(duckdb.TransactionException):
        lake.again_when_lost(duckdb.connect(), step, QUICK)
    assert len(calls) == QUICK.tries + 1
    step, calls = _step([duckdb.CatalogException("no such table")])
    with pytest.raises(duckdb.CatalogException):
        lake.again_when_lost(duckdb.connect(), step, QUICK)
    assert len(calls) == 1


def test_each_wait_grows_and_stays_under_its_cap(monkeypatch):
    waits = []
    monkeypatch.setattr(lake.random, "uniform", lambda low, high: waits.append(high) or 0.0)
    for lost in range(1, 12):
        lake.TURN_WRITE_BACKOFF.pause(lost)
    assert waits[:3] == pytest.approx([0.004, 0.008, 0.016])
    assert max(waits) == lake.TURN_WRITE_BACKOFF.cap == 0.25
    assert waits == sorted(waits)
