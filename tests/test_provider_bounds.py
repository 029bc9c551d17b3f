"""Every numeric option of every built-in provider is bounded in its `options_schema`, and the bound is
enforced everywhere it is read: `get_provider`, the CLI's `-o NAME=VALUE`, the environment variables and the
app's number inputs — before anything is allocated or sent (docs/security.md, "Provider options")."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopback import OLLAMA, ScriptedServer
from workbench.errors import ProviderOptionError
from workbench.providers import declared, get_provider
from workbench.providers.options import properties

BUILTIN = ["offline", "ollama", "gemini", "openai", "llamacpp"]
NUMERIC = [(p, name, prop) for p in BUILTIN for name, prop in properties(declared(p, "options_schema")).items()
           if prop.get("type") in ("integer", "number")]
QUESTION = "How do I configure SSO?"


def test_every_numeric_option_of_every_builtin_provider_has_both_bounds():
    assert {n for _, n, _ in NUMERIC} >= {"n_ctx", "threads", "max_tokens", "retries", "timeout", "backoff"}
    unbounded = [f"{p}.{name}" for p, name, prop in NUMERIC
                 if "maximum" not in prop or not ({"minimum", "exclusiveMinimum"} & set(prop))]
    assert not unbounded, unbounded


@pytest.mark.parametrize("provider,option,value,allowed", [
    ("llamacpp", "n_ctx", 100_000_000, "256 to 32768"),
    ("llamacpp", "threads", 100_000, "1 to "),
    ("llamacpp", "max_tokens", 10_000_000, "1 to 32768"),
    ("openai", "max_tokens", 10_000_000, "1 to 32768"),
    ("openai", "temperature", 50.0, "0 to 2"),
    ("ollama", "retries", 1_000_000, "0 to 10"),
    ("gemini", "timeout", 1e9, "more than 0, at most 600"),
    ("openai", "backoff", 86_400.0, "0 to 30"),
    ("ollama", "timeout", float("nan"), "more than 0, at most 600"),
])
def test_out_of_range_options_are_refused_naming_the_option_the_value_and_the_range(provider, option, value,
                                                                                    allowed):
    with pytest.raises(ProviderOptionError) as caught:
        get_provider(provider, **{option: value})
    message = str(caught.value)
    assert repr(option) in message and allowed in message, message
    assert (str(int(value)) if value == value else "nan") in message, message


def test_the_largest_allowed_values_are_accepted():
    for provider, name, prop in NUMERIC:
        get_provider(provider, **{name: prop["maximum"]})


@pytest.fixture
def not_a_gguf(tmp_path):
    path = tmp_path / "model.gguf"
    path.write_bytes(b"not a model")  # old code stops at it (bad_model): no test can make llama.cpp allocate
    return str(path)


def test_cli_refuses_a_huge_context_before_loading_anything(not_a_gguf, tmp_path, capsys):
    from workbench.cli import main
    from workbench.providers import llamacpp

    loads = llamacpp.load_count
    code = main(["ask", "--provider", "llamacpp", "--model", not_a_gguf, "-o", "n_ctx=100000000",
                 "--db", str(tmp_path / "t.duckdb"), QUESTION])
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err
    assert "'n_ctx'" in err and "100000000" in err and "256 to 32768" in err, err
    assert "bad_model" not in err and llamacpp.load_count == loads


@pytest.mark.parametrize("variable,value,allowed", [("WORKBENCH_LLAMACPP_N_CTX", "100000000", "256 to 32768"),
                                                    ("WORKBENCH_LLAMACPP_THREADS", "100000", "1 to ")])
def test_a_huge_context_or_thread_count_from_the_environment_is_a_config_error_not_bad_model(
        variable, value, allowed, not_a_gguf, demo_session, monkeypatch):
    from workbench.providers import llamacpp

    monkeypatch.setenv(variable, value)
    loads = llamacpp.load_count
    record = demo_session.ask(QUESTION, provider="llamacpp", model=not_a_gguf, judge=None).record
    assert record.status == "config_error", (record.status, record.error)
    assert variable in record.error and value in record.error and allowed in record.error, record.error
    assert llamacpp.load_count == loads


@pytest.mark.parametrize("variable,value", [("WORKBENCH_PROVIDER_RETRIES", "1000000"),
                                            ("WORKBENCH_PROVIDER_TIMEOUT", "1e9"),
                                            ("WORKBENCH_PROVIDER_BACKOFF", "86400")])
def test_network_bounds_from_the_environment_are_refused_before_any_request(variable, value, monkeypatch, capsys):
    from workbench.cli import main

    with ScriptedServer([OLLAMA.error(401, "unauthorized")], repeat_last=True) as srv:  # old code: fails fast
        for name, v in {**OLLAMA.env(srv.url), variable: value}.items():
            monkeypatch.setenv(name, v)
        code = main(["ask", "--provider", "ollama", QUESTION])
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err
    assert variable in err and "outside the allowed range" in err, err
    assert srv.posts() == []  # refused before the first request


def test_cli_option_out_of_range_sends_nothing(monkeypatch, capsys):
    from workbench.cli import main

    with ScriptedServer([OLLAMA.error(401, "unauthorized")], repeat_last=True) as srv:  # old code: fails fast
        for name, v in OLLAMA.env(srv.url).items():
            monkeypatch.setenv(name, v)
        code = main(["ask", "--provider", "ollama", "-o", "retries=1000000", QUESTION])
    err = capsys.readouterr().err
    assert code != 0 and "'retries'" in err and "1000000" in err and "0 to 10" in err, err
    assert srv.posts() == []


def test_the_sidebar_number_inputs_take_their_bounds_from_the_schema(app):
    for provider in ("llamacpp", "openai", "ollama", "gemini"):
        at = app.sidebar.selectbox(key="cfg_provider").set_value(provider).run()
        assert not at.exception, at.exception
        for p, name, prop in NUMERIC:
            if p != provider:
                continue
            box = at.sidebar.number_input(key=f"cfg_opt_{provider}_{name}")
            assert box.max == prop["maximum"], (provider, name, box.max)
            assert box.min == prop.get("minimum"), (provider, name, box.min)
    assert app.sidebar.selectbox(key="cfg_provider").set_value("llamacpp").run().sidebar.number_input(
        key="cfg_opt_llamacpp_n_ctx").max == 32768


def fake_gguf(path, context: int, arch: str = "llama") -> str:
    """A GGUF header (no tensors) saying the model was trained on `context` tokens."""
    import struct

    def s(text: str) -> bytes:
        return struct.pack("<Q", len(text.encode())) + text.encode()

    kvs = [s("general.architecture") + struct.pack("<I", 8) + s(arch),
           s("general.languages") + struct.pack("<IIQ", 9, 8, 1) + s("en"),
           s(f"{arch}.context_length") + struct.pack("<II", 4, context)]
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + b"".join(kvs))
    return str(path)


def test_the_trained_context_is_read_from_the_gguf_header(tmp_path):
    from workbench.providers.llamacpp import default_gguf, trained_context

    assert trained_context(Path(fake_gguf(tmp_path / "m.gguf", 2048))) == 2048
    assert trained_context(tmp_path / "absent.gguf") is None
    if default_gguf() is not None:
        assert trained_context(default_gguf()) == 8192  # SmolLM2-135M's


def test_a_context_longer_than_the_model_was_trained_for_is_refused_before_loading(tmp_path, demo_session):
    from workbench.providers import llamacpp

    model = fake_gguf(tmp_path / "short.gguf", 2048)
    loads = llamacpp.load_count
    record = demo_session.ask(QUESTION, provider="llamacpp", model=model, n_ctx=4096, judge=None).record
    assert record.status == "config_error", (record.status, record.error)
    assert "n_ctx 4096" in record.error and "2048" in record.error and "trained" in record.error, record.error
    assert llamacpp.load_count == loads
