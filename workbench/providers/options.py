"""Provider options, read from the schema each provider declares (`Provider.options_schema`).

One JSON Schema object per provider describes the keyword options its `__init__` takes besides
`model`. The core never knows a provider's options by name: `get_provider` checks them here, the
CLI parses `--option NAME=VALUE` (and `--fault`, the offline provider's `faults`) here, and the
app's sidebar draws one input per property with `input_kind`.

The checker covers the part of JSON Schema that describes keyword options: `type` (string,
integer, number, boolean, array), `enum`, `items`, `uniqueItems`, `minimum` / `maximum` /
`exclusiveMinimum` and `additionalProperties: false`. Other keywords are accepted and not checked.
(The `jsonschema` package would check everything, but importing it costs ~1.5 s, more than a whole
offline `ask`.) `"writeOnly": true` marks a secret: it is never recorded with a turn (`redact.recorded`).
`"x-reproducible": VALUE` (an annotation) names the value of the option with which the same request
gives the same answer (temperature 0, a fixed seed, llama.cpp's prompt cache off): verification by
ablation re-runs a turn with every such value (`verify.pinned_options`).
"""

from __future__ import annotations

from typing import Any, Mapping

from ..config import env
from ..errors import ProviderError, ProviderOptionError

#: The `options_schema` keyword naming an option's reproducible value (see the module docstring).
REPRODUCIBLE = "x-reproducible"
_TYPES = {"string": str, "integer": int, "number": (int, float), "boolean": bool, "array": (list, tuple)}
_TRUE, _FALSE = {"true", "yes", "on", "1"}, {"false", "no", "off", "0"}


def properties(schema: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return dict(schema.get("properties") or {})


def problem(prop: Mapping[str, Any], value: Any) -> str | None:
    """Why `value` does not fit the property schema `prop` (its type, choices or range), or None."""
    kind = prop.get("type")
    expected = _TYPES.get(kind) if isinstance(kind, str) else None
    if expected is not None and (not isinstance(value, expected) or (kind != "boolean" and isinstance(value, bool))):
        return f"{value!r} is not {'an' if kind[0] in 'aeiou' else 'a'} {kind}"
    if "enum" in prop and value not in prop["enum"]:
        return f"{value!r} is not one of: {', '.join(map(str, prop['enum']))}"
    if isinstance(value, (int, float)) and not isinstance(value, bool) and not _in_range(prop, value):
        return f"{_number(value)} is outside the allowed range ({allowed_range(prop)})"
    if isinstance(value, (list, tuple)):
        if prop.get("uniqueItems") and len(set(map(repr, value))) != len(value):
            return "lists an item twice"
        for item in value:
            why = problem(prop.get("items") or {}, item)
            if why:
                return why
    return None


def _in_range(prop: Mapping[str, Any], value: float) -> bool:
    return (value == value  # not NaN
            and ("minimum" not in prop or value >= prop["minimum"])
            and ("exclusiveMinimum" not in prop or value > prop["exclusiveMinimum"])
            and ("maximum" not in prop or value <= prop["maximum"]))


def _number(value: float) -> str:
    return str(int(value)) if isinstance(value, int) or (value == value and float(value).is_integer()
                                                          and abs(value) < 1e16) else repr(value)


def allowed_range(prop: Mapping[str, Any]) -> str:
    """The bounds of a numeric property in words: "256 to 32768", "more than 0, at most 600"."""
    low = (f"more than {_number(prop['exclusiveMinimum'])}" if "exclusiveMinimum" in prop
           else _number(prop["minimum"]) if "minimum" in prop else None)
    high = _number(prop["maximum"]) if "maximum" in prop else None
    if low is not None and high is not None:
        return f"{low}, at most {high}" if low.startswith("more") else f"{low} to {high}"
    if low is not None:
        return low if low.startswith("more") else f"at least {low}"
    return f"at most {high}" if high is not None else "any number"


def check_options(provider: str, schema: Mapping[str, Any], options: Mapping[str, Any]) -> None:
    """Raise `ProviderOptionError` naming the provider, the option and what it takes, unless every option
    fits `schema`. An option given as None means "not given" (the provider's default) and is not checked."""
    props = properties(schema)
    for name, value in options.items():
        if name not in props:
            _check_known(provider, schema, props, name)
            continue
        why = None if value is None else problem(props[name], value)
        if why:
            raise ProviderOptionError(f"provider {provider!r} option {name!r}: {why}")


def parse_option(provider: str, schema: Mapping[str, Any], text: str) -> tuple[str, Any]:
    """`NAME=VALUE` from the command line as (name, value), the value converted by the schema's type
    (an array is comma-separated: `faults=corrupt_id,forget_link`)."""
    name, sep, raw = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise ProviderOptionError(f"an option is NAME=VALUE, not {text!r}")
    props = properties(schema)
    if name not in props:
        _check_known(provider, schema, props, name)
    return name, _convert(provider, name, props.get(name, {}), raw.strip())


def _check_known(provider: str, schema: Mapping[str, Any], props: Mapping[str, Any], name: str) -> None:
    """A name the schema does not declare is refused when the schema takes no other options."""
    if schema.get("additionalProperties") is False:
        known = ", ".join(sorted(props)) or "none"
        raise ProviderOptionError(f"provider {provider!r} has no option {name!r} (its options: {known})")


def _convert(provider: str, name: str, prop: Mapping[str, Any], raw: str) -> Any:
    kind = prop.get("type")
    try:
        if kind == "array":
            return [_convert(provider, name, prop.get("items") or {}, part.strip()) for part in raw.split(",")
                    if part.strip()]
        if kind == "integer":
            return int(raw)
        if kind == "number":
            return float(raw)
        if kind == "boolean":
            if raw.lower() in _TRUE | _FALSE:
                return raw.lower() in _TRUE
            raise ValueError(raw)
    except ValueError:
        raise ProviderOptionError(f"provider {provider!r} option {name!r}: {raw!r} is not {'an' if kind[0] in 'aeiou' else 'a'} "
                                  f"{kind}") from None
    return raw


def input_kind(prop: Mapping[str, Any]) -> str | None:
    """How a form asks for one option: `select` (enum), `multiselect` (array of enum), `checkbox`,
    `integer`, `number`, `secret`, `text`; None when the schema gives no way to ask."""
    kind = prop.get("type")
    if "enum" in prop:
        return "select"
    if kind == "array" and "enum" in (prop.get("items") or {}):
        return "multiselect"
    if kind == "string":
        return "secret" if prop.get("writeOnly") else "text"
    return {"boolean": "checkbox", "integer": "integer", "number": "number"}.get(kind)


def setting(value: Any, env_name: str, default: float, prop: Mapping[str, Any] | None = None,
            name: str | None = None) -> float:
    """`value` if given, else the number in `$env_name`, else `default` (a bad number names the variable).

    With `prop` (the option's `options_schema` property), a given or configured value outside its bounds
    is a `config_error` naming the option or variable, the value and the allowed range — raised before
    the provider allocates or sends anything.
    """
    if value is not None:
        where, number = f"option {name or env_name!r}", value
    else:
        raw = env(env_name)
        if raw is None:
            return default
        try:
            number = float(raw)
        except ValueError:
            raise ProviderError(f"{env_name}={raw!r} is not a number", status="config_error") from None
        where = f"{env_name}={raw!r}"
        if prop is not None and prop.get("type") == "integer" and number.is_integer():
            number = int(number)
    if prop is not None:
        why = problem(prop, number)
        if why:
            raise ProviderError(f"{where}: {why}", status="config_error")
    return float(number)
