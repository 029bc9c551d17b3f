"""The inputs that choose how a provider runs: its modes, its tool protocol, its model (a file only inside the allowed
roots) and the options its `options_schema` declares (a server only one the operator allows)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from ..errors import PathNotAllowedError
from ..paths import confine, confine_server
from ..providers import declared, steps
from ..providers.options import input_kind, properties
from ..render.escaping import escape_markdown
from .caches import provider_caps


def protocol_picker(container, provider: str, key: str) -> str | None:
    """A radio of the tool protocols `provider` supports (its default first chosen); None when there is no choice."""
    caps = provider_caps(provider)
    if len(caps["protocols"]) < 2:
        return None
    options = caps["protocols"]
    index = options.index(caps["default_protocol"]) if caps["default_protocol"] in options else 0
    return container.radio("Tool protocol", options, index=index, horizontal=True, key=key,
                           help="native: the model's own tool calls · json-steps: every model output is forced by a "
                                "JSON schema to be one action (small local models need it)")


def modes_for(provider: str) -> tuple[str, ...]:
    """The modes a provider can run (the rule lives in `providers.steps.supported_modes`)."""
    return steps.supported_modes(provider)


def option_inputs(container, provider: str) -> tuple[tuple[str, Any], ...]:
    """One input per property of the provider's `options_schema` (enum → select box, array of enums →
    multiselect, boolean → checkbox, integer / number → number input within the schema's minimum and
    maximum, string → text input, a `writeOnly` string → password input); returns the options set to
    something other than the default.
    A string naming a server (`"format": "uri"`) is kept only when the operator allows that server
    (`paths.confine_server`, docs/security.md)."""
    chosen = []
    for name, prop in properties(declared(provider, "options_schema")).items():
        kind = input_kind(prop)
        if kind is None:
            continue
        label, key, default = prop.get("title") or name, f"cfg_opt_{provider}_{name}", prop.get("default")
        helptext = prop.get("description")
        if kind == "select":
            options = list(prop["enum"])
            value = container.selectbox(label, options, index=options.index(default) if default in options else 0,
                                        key=key, help=helptext)
        elif kind == "multiselect":
            value = tuple(container.multiselect(label, prop["items"]["enum"], default=default or [], key=key,
                                                help=helptext))
        elif kind == "checkbox":
            value = container.checkbox(label, value=bool(default), key=key, help=helptext)
        elif kind in ("integer", "number"):
            cast = int if kind == "integer" else float  # the schema's bounds, in the input's own type
            low, high = (None if prop.get(b) is None else cast(prop[b]) for b in ("minimum", "maximum"))
            value = container.number_input(label, value=default, min_value=low, max_value=high, key=key,
                                           help=helptext, step=1 if kind == "integer" else None,
                                           placeholder="default")
        else:
            value = container.text_input(label, key=key, help=helptext, placeholder="default",
                                         type="password" if kind == "secret" else "default").strip() or None
            if value is not None and prop.get("format") == "uri":  # a server: the operator's, or one allowed
                value = _allowed(container, lambda: confine_server(value, label), "Using the default.")
        if value is not None and value != (tuple(default) if isinstance(default, list) else default):
            chosen.append((name, value))
    return tuple(chosen)


def _allowed(container, check: Callable[[], Any], instead: str) -> Any:
    """`check()`, the confinement of something a visitor typed (docs/security.md); when it refuses, None,
    with the refusal and what is used `instead` shown."""
    try:
        return check()
    except PathNotAllowedError as exc:
        container.error(escape_markdown(f"{exc}. {instead}"))
        return None


def typed_model(sb, provider: str, text: str) -> str | None:
    """A typed model; for a provider whose model is a file (`model_is_path`), only one inside the allowed
    roots or the provider's own default, else None (the default model)."""
    if not text or not declared(provider, "model_is_path"):
        return text or None
    default = provider_caps(provider)["model"]
    return _allowed(sb, lambda: str(confine(text, "model file", also=(Path(default),) if default else ())),
                    "Using the default model.")
