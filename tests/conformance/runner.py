"""One conformance app's process, once its imports are done, for each of its runs (tests/test_audit_conformance.py).

`python runner.py APP` imports the app's module (its framework, its instrumentor: most of a run's time), then reads
one JSON request a line on stdin and forks a child for each: the child takes the request's environment (exactly the
one a fresh process would get), its working folder and its stdout/stderr files, then runs either the app as a script
(`{"argv": [...]}`: `python APP.py ARGS` as written) or a docs/audit.md setup snippet (`{"code": "..."}`: what
`python -c CODE` would run), and exits the way that process would (atexit handlers included). The parent answers each
request with a line `{"rc": N}` once its child has exited. Nothing is instrumented before the fork: every run starts
where the app's own process would, its modules imported; so one import serves the app's variants and its snippet.
The runner also imports what every run imports before it instruments (`kit.PROVIDER_MODULES`: the OTel SDK and its
OTLP exporter) and what an imported client loads lazily (`LAZY`), and a child ends as the interpreter's exit would up to what anyone sees (threads joined, atexit
handlers run, output flushed), without the teardown of every module (`_exit`). The imports run with the collector
off and their objects frozen (`gc.freeze`, the gc module's advice for a fork without exec): a child's collections
never walk them, which would copy every page they are on (twice the child's time for llama-index); the child collects
its own objects as usual.
"""

from __future__ import annotations

import gc
import json
import os
import runpy
import sys
import threading
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
from kit import PROVIDER_MODULES  # noqa: E402  (stdlib only; this folder is the script's sys.path[0])

#: What a package the app imported loads only once used, imported with it: the openai client's resources (its
#: ~480 modules of types and resources, which `client.chat` and the like import on first use). The instrumentors
#: that patch them (OpenLLMetry's, the OTel one) wrap their classes' methods by module name, importing the module
#: if need be: the same class objects whenever it is imported, so a run sees what it would.
LAZY = {"openai": "openai.resources"}


def _child(request: dict, app: str) -> None:
    """The run of `request`, in the forked child: it never returns (SystemExit ends the interpreter as usual)."""
    gc.enable()
    os.chdir(request["cwd"])
    for fd, name in ((0, os.devnull), (1, request["stdout"]), (2, request["stderr"])):
        os.dup2(os.open(name, os.O_RDONLY if fd == 0 else os.O_WRONLY | os.O_CREAT | os.O_TRUNC), fd)
    os.environ.clear()
    os.environ.update(request["env"])
    import kit  # read its environment again: the run's own (`kit` reads it at import)

    kit.MODEL_URL = os.environ.get("CONFORMANCE_MODEL", kit.MODEL_URL)
    kit.RUN = os.environ.get("CONFORMANCE_RUN", "conf")
    code = 0
    try:
        if "code" in request:
            sys.argv = ["-c"]
            exec(compile(request["code"], "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
        else:
            sys.argv = [str(HERE / f"{app}.py"), *request["argv"]]
            runpy.run_path(sys.argv[0], run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - what the interpreter would print, and its exit code
        traceback.print_exc()
        code = 1
    _exit(code)


def _exit(code: int) -> None:
    """End the child as the interpreter's exit would, up to what anyone else can see: its non-daemon threads
    joined, its atexit handlers run (an exporter's shutdown sends what it holds), its output flushed; then
    `os._exit`, skipping the interpreter's teardown of every module and object (a fifth of a run's CPU, and a copy of
    each page the frozen imports are on, which a teardown touches)."""
    import atexit

    threading._shutdown()  # noqa: SLF001 - what Py_FinalizeEx calls first
    atexit._run_exitfuncs()  # noqa: SLF001 - it prints a handler's exception, as the interpreter does
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def main(app: str) -> None:
    gc.disable()  # no freed holes in the pages the children share (the gc module's advice for fork without exec)
    for module in PROVIDER_MODULES:  # imported by every run before it instruments anything (kit.tracer_provider)
        __import__(module)
    __import__(app)
    for loaded, lazy in LAZY.items():
        if loaded in sys.modules:
            __import__(lazy)
    gc.freeze()  # the imports' objects: never traversed by a child's collections (no copy of every page)
    for line in sys.stdin:
        if threading.active_count() != 1:  # a fork copies only this thread: a framework's own would be lost
            raise SystemExit(f"{app} runs threads after its imports: {threading.enumerate()}")
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(request, app)
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"rc": os.waitstatus_to_exitcode(status)}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
