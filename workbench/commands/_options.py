"""Options shared by several commands, so flags stay consistent."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import DEFAULT_CONTEXT_TURNS, DEFAULT_K, DEFAULT_MODE, DEFAULT_PROVIDER, DEFAULT_RETRIEVER, MAX_CONTEXT_TURNS, MAX_K, MAX_WAIT_SECONDS, Settings, set_env
from ..errors import WorkbenchError
from ..providers import declared, provider_names
from ..providers.options import check_options, parse_option
from ..providers.steps import NATIVE, TOOL_PROTOCOLS
from ..retrieval import retriever_names
from ..terminal import neutralize
from ..types import MODES, ContextPolicy

if TYPE_CHECKING:
    from ..session import AskSpec


#: The help of `-k`, its default and bound read from where they are stated (`config.DEFAULT_K`, `config.MAX_K`).
K_HELP = f"results per search / excerpts (default %(default)s, at most {MAX_K})"
#: The help of a questions file argument (`ask --questions`, `eval QUESTIONS.jsonl`): what a line holds.
QUESTIONS_HELP = ('a file of {"question": …} lines; lines with the same "conversation": ID are one conversation, '
                  "asked in file order")


def add_corpus_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--corpus", help="corpus folder or .jsonl file (default: the bundled demo corpus)")


class LazyHelp:
    """A help text computed only when help is shown: listing the registries imports every built-in and
    plug-in, which no command that runs should pay for."""

    def __init__(self, make):
        self._make = make

    def __str__(self) -> str:
        return self._make()

    # what argparse asks of a help text
    def __mod__(self, params) -> str:
        return str(self) % params

    def __contains__(self, text: str) -> bool:
        return text in str(self)

    def strip(self, chars: str | None = None) -> str:
        return str(self).strip(chars)


def provider_help() -> str:
    """The providers, each with its label and default model, from the registry (built-ins and plug-ins)."""

    def one(name: str) -> str:
        label, model = declared(name, "label"), declared(name, "default_model")
        shown = label if label.startswith(name) else f"{name} ({label})" if label != name else name
        return shown + (f" [model: {model}]" if model else "")

    return ("chat provider (default %(default)s): " + ", ".join(one(n) for n in provider_names())
            + "; plug-ins register more (docs/plugins.md)")


def retriever_help() -> str:
    return ("retriever (default %(default)s): " + ", ".join(retriever_names())
            + " (the -minilm ones need requirements-minilm.txt); plug-ins register more (docs/plugins.md)")


def tool_protocol_help() -> str:
    """How agent mode calls tools, with each provider's default protocol read from what it declares."""

    by_protocol: dict[str, list[str]] = {}
    for name in provider_names():
        by_protocol.setdefault(declared(name, "default_tool_protocol"), []).append(name)
    by_protocol.pop(NATIVE, None)
    defaults = "".join(f"{p} for {' and '.join(names)}, " for p, names in sorted(by_protocol.items())) + \
        f"{NATIVE} elsewhere"
    return ("agent mode: how the model calls tools: native tool calls, or json-steps (each output forced by a "
            f"JSON schema to be one action); default: the provider's ({defaults})")


def fault_help() -> str:
    """`--fault` is an alias of `--option faults=NAME`, for the providers that declare a `faults` option."""

    takers = {n: declared(n, "options_schema").get("properties", {}).get("faults") for n in provider_names()}
    takers = {n: prop for n, prop in takers.items() if prop}
    choices = sorted({c for prop in takers.values() for c in (prop.get("items") or {}).get("enum", ())})
    return (f"alias of --option faults=NAME (repeatable), an option only {', '.join(takers) or 'no provider'} "
            f"declares: {', '.join(choices)}")


def add_run_options(p: argparse.ArgumentParser) -> None:
    add_corpus_option(p)
    p.add_argument("--provider", default=DEFAULT_PROVIDER, help=LazyHelp(provider_help))
    p.add_argument("--model", help="model for the provider (each provider's default is listed under --provider)")
    p.add_argument("--retriever", default=DEFAULT_RETRIEVER, help=LazyHelp(retriever_help))
    p.add_argument("--mode", default=DEFAULT_MODE, choices=MODES, help="agent (tools) or excerpts")
    p.add_argument("--tool-protocol", choices=TOOL_PROTOCOLS, default=None, help=LazyHelp(tool_protocol_help))
    p.add_argument("-k", "--k", type=k_value, default=DEFAULT_K, help=K_HELP)
    p.add_argument("-o", "--option", action="append", default=[], metavar="NAME=VALUE",
                   help="a provider option, checked against the provider's options schema (repeatable; a list is "
                        "comma-separated), e.g. ollama host=http://gpu-box:11434, timeout=30; llamacpp max_tokens=160")
    p.add_argument("--fault", action="append", default=[], metavar="NAME", help=LazyHelp(fault_help))


def add_verify_options(p: argparse.ArgumentParser) -> None:
    from ..verify import DEFAULT_BUDGET, METHOD

    p.add_argument("--verify", action="store_true",
                   help=f"verify each answer by ablation ({METHOD}, explained in docs/design.md §9); with a real "
                        "model every re-run costs model calls")
    p.add_argument("--verify-budget", type=positive_int, default=DEFAULT_BUDGET, metavar="N",
                   help=f"at most N re-runs per answer, the control included (default {DEFAULT_BUDGET}); candidates "
                        "over it get no verdict")


def add_context_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--context-turns", type=context_turns, default=DEFAULT_CONTEXT_TURNS, metavar="N",
                   help="in a conversation: how many of the latest earlier turns the model keeps with their tool "
                        "results (default %(default)s, 0 to " f"{MAX_CONTEXT_TURNS}); older turns keep question and "
                        "answer (docs/design.md §11)")


def context_policy(args: argparse.Namespace):
    """The context policy (`types.ContextPolicy`) that `--context-turns` chose."""
    return ContextPolicy(turns=args.context_turns)


def add_json_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print JSON, one object per line")


def add_db_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", metavar="FILE.duckdb",
                   help="trace database (default: $WORKBENCH_DB, else <WORKBENCH_HOME>/traces.duckdb), or a team "
                        "store: 'ducklake:postgres:<libpq connection string>' (docs/traces.md)")
    p.add_argument("--data-path", metavar="FOLDER",
                   help="a team store's Parquet files: a folder, a network share or s3://… (default: "
                        "$WORKBENCH_DATA_PATH; needed when the store is created)")


def add_trace_options(p: argparse.ArgumentParser) -> None:
    add_db_option(p)
    p.add_argument("--no-trace", action="store_true", help="do not log turns to the trace database")


def settings_of(args: argparse.Namespace) -> Settings:
    """The environment as `cli.main` read it once (`args.settings`); read now for a command called without it."""
    return Settings.given(getattr(args, "settings", None))


def db_path(args: argparse.Namespace):
    """The trace database chosen by --db, else the default (`Settings.trace_db`). A --data-path is set as
    $WORKBENCH_DATA_PATH for this process and its children (a typed query runs in one): where lake.py reads it."""
    if getattr(args, "data_path", None):
        from ..trace.lake import DATA_PATH_ENV

        set_env(DATA_PATH_ENV, args.data_path)
    return Path(args.db).expanduser() if getattr(args, "db", None) else settings_of(args).trace_db


def warn_skipped(corpus) -> None:
    """Say which files of a corpus folder were not read (symlinks leaving it): nothing is left out silently."""

    for line in corpus.skipped:
        print(neutralize(f"warning: {line}"), file=sys.stderr)


def provider_options(args: argparse.Namespace) -> dict:
    """The provider options given by `--option NAME=VALUE` and `--fault`, converted and checked against the
    chosen provider's `options_schema` (so `--fault` with a provider that has no faults is an error)."""

    schema = declared(args.provider, "options_schema")
    options: dict = {}
    for text in args.option:
        name, value = parse_option(args.provider, schema, text)
        options[name] = options.get(name, []) + value if isinstance(value, list) else value
    if args.fault:
        options["faults"] = [*options.get("faults", []), *args.fault]
    check_options(args.provider, schema, options)
    return options


def ask_spec(args: argparse.Namespace) -> "AskSpec":
    """How `ask` and `chat` ask each turn (`session.AskSpec`): the run options, `--verify` and the provider's options
    (`provider_options`)."""
    from ..session import AskSpec  # the session (and the agent behind it) loads only when a command asks

    return AskSpec(provider=args.provider, model=args.model, mode=args.mode, k=args.k, tool_protocol=args.tool_protocol,
                   verify=args.verify, verify_budget=args.verify_budget, options=provider_options(args))


def positive_seconds(text: str) -> float:
    """argparse type for durations such as --timeout: a number of seconds above 0 (not NaN)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, not {text}")
    if not value <= MAX_WAIT_SECONDS:
        raise argparse.ArgumentTypeError(f"may be at most {MAX_WAIT_SECONDS:g} seconds (one hour), not {text}")
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

    n = positive_int(text)
    if n > MAX_K:
        raise argparse.ArgumentTypeError(f"must be at most {MAX_K}, not {n}")
    return n


def context_turns(text: str) -> int:
    """argparse type for --context-turns: the bound `ContextPolicy` holds (docs/security.md)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    try:
        ContextPolicy(turns=n)
    except WorkbenchError:
        raise argparse.ArgumentTypeError(f"must be from 0 to {MAX_CONTEXT_TURNS}, not {n}") from None
    return n
