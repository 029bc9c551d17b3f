"""YAML front matter without the parts of YAML that let a few hundred bytes cost gigabytes.

A front matter block is a handful of `key: value` lines, so three things are refused before
anything is built: aliases (`*name`: ten nested levels of ten aliases each are 10^10 values once
anything walks or prints them — the "billion laughs"), more than `MAX_BYTES` of text, and nesting
deeper than `MAX_DEPTH`. Refusing every alias (not counting expansions) is the simplest rule that
holds for every shape of bomb — sequences, mappings, merge keys, block or flow style — and no
front matter needs one. Anchors alone are harmless and allowed.

Scalars stay strings (BaseLoader): ids like 0123 or 4412377144338 stay exact.
"""

from __future__ import annotations

from typing import Any

import yaml

try:
    _LOADER = yaml.CBaseLoader
except AttributeError:  # pragma: no cover - PyYAML built without libyaml
    _LOADER = yaml.BaseLoader

MAX_BYTES = 64 * 1024
MAX_DEPTH = 32


class YamlLimitError(ValueError):
    """The YAML uses a refused feature or is too large; `line` is 0-based within the YAML text."""

    def __init__(self, message: str, line: int = 0):
        super().__init__(message)
        self.line = line


def load(text: str) -> Any:
    """Parse `text` as YAML with plain-string scalars; raise `YamlLimitError` (or `yaml.YAMLError`)."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_BYTES:
        raise YamlLimitError(f"front matter is larger than {MAX_BYTES // 1024} KB ({size:,} bytes); "
                             "keep metadata in front matter and text in the body")
    # The event stream is what the composer would build the value from: checking it first means an
    # alias is refused before a single node is constructed. `open_` holds, for each open collection, the
    # keys seen so far and whether a key comes next (a mapping), or None (a sequence).
    open_: list[list | None] = []
    for event in yaml.parse(text, Loader=_LOADER):
        if isinstance(event, yaml.AliasEvent):
            raise YamlLimitError(f"YAML aliases (*{event.anchor}) are not allowed in front matter: "
                                 "write the value out", event.start_mark.line)
        if isinstance(event, yaml.NodeEvent) and open_ and open_[-1] is not None:
            keys, key_next = open_[-1]
            if key_next and isinstance(event, yaml.ScalarEvent):
                if event.value in keys:  # PyYAML would silently keep the last value
                    raise YamlLimitError(f"duplicate key {event.value!r} in front matter: give each key once",
                                         event.start_mark.line)
                keys.add(event.value)
            open_[-1][1] = not key_next
        if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            open_.append([set(), True] if isinstance(event, yaml.MappingStartEvent) else None)
            if len(open_) > MAX_DEPTH:
                raise YamlLimitError(f"front matter is nested deeper than {MAX_DEPTH} levels", event.start_mark.line)
        elif isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            open_.pop()
    return yaml.load(text, Loader=_LOADER)
