"""The child process of a user's query (`isolated.run_user_query` spawns it): it caps its own address space, runs
the query through a `TraceReader` and writes the pickled outcome. Its own room, so that the reader (which runs
queries in-process) and `isolated.py` (which spawns this child) do not import each other."""

from __future__ import annotations

import json
import os
import pickle
import sys
import tempfile

from .. import errors
from .isolated import QUERY_ADDRESS_SPACE, memory_message, query_nice

def child() -> None:
    """The child process: read the request on stdin, write the pickled outcome on stdout."""
    result = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything DuckDB prints (its progress bar) goes to stderr, not into the result
    request = json.loads(sys.stdin.buffer.read())
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_AS, (QUERY_ADDRESS_SPACE, QUERY_ADDRESS_SPACE))
    except (ImportError, ValueError, OSError):  # no RLIMIT_AS here (Windows, some macOS): DuckDB's limits remain
        pass
    from .lake import is_team_store  # after the cap, as DuckDB's own allocations are
    from .reader import TraceReader

    try:
        if hasattr(os, "nice") and is_team_store(request["path"]):  # the analyst's bound (isolated.py); not Windows
            os.nice(query_nice())
        reader = TraceReader(request["path"], timeout=request["lock_timeout"], query_timeout=request["query_timeout"])
        with tempfile.TemporaryDirectory(prefix="workbench-query-") as spill:
            rows = reader.run_bounded(request["sql"], files=request["files"], temp_directory=spill,
                                      owner=request.get("owner"))
        out = pickle.dumps(("ok", tuple(rows)), protocol=pickle.HIGHEST_PROTOCOL)
    except errors.WorkbenchError as exc:
        out = pickle.dumps(("error", (type(exc).__name__, str(exc))))
    except MemoryError:
        out = pickle.dumps(("error", ("TraceStoreError", memory_message())))
    result.write(out)
    result.close()
