"""The contract schemas' validators are built without rfc3987-syntax's import-time parsers (workbench/schemas,
`load_jsonschema`), and jsonschema's IRI checks still give rfc3987-syntax's answers."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest
from conftest import ROOT

pytestmark = pytest.mark.skipif(importlib.util.find_spec("rfc3987_syntax") is None,
                                reason="rfc3987-syntax is not installed (JupyterLab's jupyter-events brings it): "
                                       "importing jsonschema costs nothing to avoid")

IRIS = ["https://example.com/a?b=c#d", "http://例え.テスト/パス", "urn:isbn:0451450523", "relative/path", "",
        "http://[::1", "not an iri at all", "http://exa mple.com/"]

CHILD = f"""
import json, sys
from workbench import schemas
assert schemas.best_error(schemas.PAYLOAD, {{}}) is not None
schemas.validator(schemas.TURN_RECORD)
loaded_before = sorted(m for m in ("rfc3987_syntax", "lark") if m in sys.modules)
import jsonschema
checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
checked = {{fmt: [checker.conforms(v, fmt) for v in {IRIS!r}] for fmt in ("iri", "iri-reference")}}
import rfc3987_syntax
real = {{fmt: [rfc3987_syntax.is_valid_syntax(fmt.replace("-", "_"), v) for v in {IRIS!r}]
        for fmt in ("iri", "iri-reference")}}
print(json.dumps({{"loaded_before": loaded_before, "checked": checked, "real": real,
                  "real_module": hasattr(rfc3987_syntax, "is_valid_syntax_iri")}}))
"""


def test_validators_leave_rfc3987_syntax_unimported_and_iri_checks_unchanged():
    proc = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["loaded_before"] == [], "building the validators imported rfc3987-syntax (and its parsers)"
    assert out["checked"] == out["real"], "jsonschema's iri checks differ from rfc3987-syntax's own answers"
    assert True in out["real"]["iri"] and False in out["real"]["iri"], "the values exercise both answers"
    assert out["real_module"], "a later `import rfc3987_syntax` is the real module, not the stand-in"
