"""Cost of finding citations with a CommonMark parser (issue 24, item 7). Prints medians; see benchmarks/README.md.

    .venv/bin/python benchmarks/citation_parse.py

For core_speed.py's synthetic answer (20 links) and a 20 KB answer with code blocks and markers:
`extract_citations` (markdown-it-py with its inline rules wrapped to record offsets) against the named
anchor, markdown-it-py's own `MarkdownIt("commonmark").parse` of the same text (what any parser-based
extraction pays at least), and `sources_payload(record).to_json()` of the synthetic turn (target ≤ 1 ms in core_speed.py).
Then seconds for 200,000-character hostile answers (the shapes of tests/test_pathological_text.py).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from markdown_it import MarkdownIt  # noqa: E402

from core_speed import median_ms, synthetic_turn  # noqa: E402
from workbench.provenance import extract_citations, sources_payload  # noqa: E402

HOSTILE = ["[", "![", "[[", "[1] ", "`", "```x\n", "<", "\\["]


def long_answer() -> str:
    part = ("Configure SSO in the admin panel [1]. See [the guide](https://help.example.com/articles/sso) and "
            "`[x](not-a-citation)`.\n\n```\n[y](inside-a-fence) [2]\n```\n\n- step one [2, 3]\n- step two\n\n")
    return part * (20_000 // len(part))


def main() -> int:
    plain = MarkdownIt("commonmark")
    rec = synthetic_turn()
    for name, answer, mode in (("synthetic answer, 20 links", rec.answer, "agent"),
                               ("20 KB answer, code and markers", long_answer(), "excerpts")):
        n = 2000 if len(answer) < 5000 else 100
        ours = median_ms(lambda: extract_citations(answer, mode), n)
        anchor = median_ms(lambda: plain.parse(answer), n)
        print(f"{name} ({len(answer):,} chars): extract_citations {ours:.3f} ms · anchor markdown-it parse {anchor:.3f} ms")
    print(f"sources_payload(...).to_json(), 50 retrieved + 20 citations: {median_ms(lambda: sources_payload(rec).to_json(), 2000):.3f} ms")
    for unit in HOSTILE:
        s = unit * (200_000 // len(unit))
        t = time.process_time()
        extract_citations(s, "excerpts")
        print(f"hostile {unit!r} × {len(s) // len(unit):,}: {time.process_time() - t:.2f} s CPU")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
