"""Secrets have one home, `workbench/redact.py` (issue 21, item 3): each path out of the workbench goes
through it, and each test here fails when its path lets a secret through."""

from __future__ import annotations

import ast
import json

from conftest import ROOT
from sources import parsed
from workbench.errors import ProviderError
from workbench.providers import declared
from workbench.providers.http import failure
from workbench.providers.openai import OpenAIProvider
from workbench.redact import recorded, redact_config, scrub_secrets

KEY, PASSWORD = "sk-live-0123456789abcdef", "S3cret-pass-0987"
URL = f"http://alice:{PASSWORD}@127.0.0.1:9/v1"


def _clean(value) -> bool:
    text = json.dumps(value) if not isinstance(value, str) else value
    return KEY not in text and PASSWORD not in text


def test_text_path_scrubs_given_keys_urls_parameters_bearer_tokens_and_configured_servers(monkeypatch):
    monkeypatch.setenv("SOME_SERVICE_URL", f"https://bob:{PASSWORD}x@svc.example")
    texts = [f"the key {KEY} was refused", f"cannot connect to {URL}", f"GET /v1/models?key={KEY}&alt=json",
             f"Authorization: Bearer {KEY}", f"bob:{PASSWORD}x failed"]
    for text in texts:
        out = scrub_secrets(text, [KEY])
        assert _clean(out) and "[redacted]" in out, out


def test_options_path_never_records_a_write_only_option_and_scrubs_server_urls():
    schema = declared("openai", "options_schema")
    out = recorded(schema, {"api_key": KEY, "base_url": URL, "timeout": 5.0, "seed": None})
    assert _clean(out) and out["timeout"] == 5.0 and "api_key" not in out and "seed" not in out
    assert out["base_url"].startswith("http://[redacted]@127.0.0.1:9")
    assert _clean(recorded({"properties": {}}, {"servers": [URL, "http://127.0.0.1"]}))


def test_config_path_redacts_secret_keys_at_any_depth():
    config = {"provider": "openai", "options": {"api_key": KEY, "nested": [{"Authorization": KEY}]},
              "password": PASSWORD, "k": 5}
    out = redact_config(config)
    assert _clean(out) and out["k"] == 5 and out["options"]["api_key"] == "[redacted]"


def test_failure_path_redacts_the_given_secrets_and_the_providers_own_url():
    provider = OpenAIProvider(base_url=URL, api_key=KEY)
    assert PASSWORD not in repr(provider) and provider.base_url == "http://127.0.0.1:9/v1"
    provider.server_url = URL  # any URL-like attribute a provider keeps is searched for credentials
    error = failure(provider, "auth_error", f"{URL} refused {KEY}; raw {PASSWORD}", 0.0, 0, [KEY])
    assert isinstance(error, ProviderError) and _clean(str(error)) and error.status == "auth_error"


def test_no_other_module_handles_secrets_itself():
    """The redaction marker and the secret-key pattern are written in `redact.py` only."""
    bad = []
    for f in (ROOT / "workbench").rglob("*.py"):
        if f.name == "redact.py":
            continue
        for node in ast.walk(parsed(f)):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and (
                    "[redacted]" in node.value or "<redacted>" in node.value or "password|" in node.value):
                bad.append(f"{f.relative_to(ROOT)}:{node.lineno}")
    assert not bad, bad
