"""The JSON Schemas of the project's two contracts, shipped with the package.

`payload.schema.json` is the sources payload every turn returns (docs/design.md), and
`turn-record.schema.json` the turn record `provenance` reads. Tests validate what the library reads
and writes against these files; `load(name)` returns one as a dict, `validator(name)` a jsonschema validator of
it (`load_jsonschema` imports jsonschema: use it rather than `import jsonschema` wherever these schemas are checked).
"""

from __future__ import annotations

import importlib.util
import json
import sys
import types
from functools import lru_cache
from pathlib import Path
from typing import Any

SCHEMA_DIR = Path(__file__).resolve().parent
PAYLOAD = "payload.schema.json"
TURN_RECORD = "turn-record.schema.json"


@lru_cache(maxsize=None)
def load(name: str) -> dict[str, Any]:
    """The schema `name` (e.g. `payload.schema.json`) as a dict."""
    return json.loads((SCHEMA_DIR / name).read_text(encoding="utf-8"))


@lru_cache(maxsize=None)
def validator(name: str):
    """A JSON Schema (draft 2020-12) validator of the schema `name`, built once per process."""
    return load_jsonschema().Draft202012Validator(load(name))


def best_error(name: str, data: Any):
    """The error jsonschema finds most relevant in `data` against the schema `name` (`best_match`); None if valid."""
    return load_jsonschema().exceptions.best_match(validator(name).iter_errors(data))


def load_jsonschema():
    """The jsonschema package, imported without building rfc3987-syntax's IRI parsers.

    jupyter-events (which JupyterLab installs) asks for `jsonschema[format-nongpl]`, which brings rfc3987-syntax;
    when it is installed, importing jsonschema imports it, and it compiles ~38 Earley parsers at import time
    (upstream: python-jsonschema/jsonschema#1428): ~1 s of every `workbench ask --json` (1.42 against 0.41 s), 3.3 s
    of a test worker's start (benchmarks/README.md). Our schemas name no `format` and the validators check none, so
    during jsonschema's import a stand-in takes that module's place whose one function, `is_valid_syntax`, imports
    the real module on its first call: jsonschema's `iri` and `iri-reference` checks behave as before, for any code
    in the process that uses them. The stand-in leaves `sys.modules` as soon as jsonschema is imported, so a later
    `import rfc3987_syntax` is the real one."""
    if ("jsonschema" not in sys.modules and "rfc3987_syntax" not in sys.modules
            and importlib.util.find_spec("rfc3987_syntax") is not None):
        stand_in = types.ModuleType("rfc3987_syntax", "Stands in while jsonschema is imported (load_jsonschema).")
        stand_in.is_valid_syntax = _is_valid_syntax
        sys.modules["rfc3987_syntax"] = stand_in
        try:
            import jsonschema  # noqa: F401  (imported with the stand-in in place)
        finally:
            if sys.modules.get("rfc3987_syntax") is stand_in:
                del sys.modules["rfc3987_syntax"]
    import jsonschema

    return jsonschema


def _is_valid_syntax(term: str, value: str) -> bool:
    """rfc3987-syntax's `is_valid_syntax`, its module imported on the first IRI that jsonschema checks."""
    from rfc3987_syntax import is_valid_syntax

    return is_valid_syntax(term, value)
