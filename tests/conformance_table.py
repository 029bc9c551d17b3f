"""docs/audit.md's support table, generated from the conformance suite (tests/test_audit_conformance.py).

    .venv/bin/python tests/conformance_table.py --write    # after a run of the suite: rewrite the table
    .venv/bin/python tests/conformance_table.py            # print it

Each row is one app of the suite: its framework, the instrumentor and the versions installed in .venv-audit-apps
(read there), what the app makes the audit measure, and its result in the suite's last run: `passes`, or every check
it failed — the known limits. The suite writes each app's result to a file of its own, `RESULTS/<app>.json`
(tests/.conformance-results/, git-ignored; not pytest's cache, so `-p no:cacheprovider` and clearing that cache
change nothing), which this script reads.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "audit.md"
START, END = "<!-- conformance-table -->", "<!-- /conformance-table -->"
RESULTS = ROOT / "tests" / ".conformance-results"
APPS_PYTHON = Path(os.environ.get("WORKBENCH_AUDIT_APPS") or ROOT / ".venv-audit-apps") / "bin" / "python"
TOOLS = "tool calls, JSON hits, an article opened in full"

#: app -> (framework, the distributions named as its instrumentor and framework, what it makes the audit measure)
CELLS: dict[str, tuple[str, tuple[str, ...], str]] = {
    "openai_chat": ("openai client, chat completions", ("openinference-instrumentation-openai", "openai"), TOOLS),
    "openai_responses": ("openai client, Responses API", ("openinference-instrumentation-openai", "openai"),
                         TOOLS + "; history as input items"),
    "anthropic_tools": ("anthropic (tool_use / tool_result)", ("openinference-instrumentation-anthropic", "anthropic"),
                        TOOLS),
    "google_genai_tools": ("google-genai (functionCall / functionResponse)",
                           ("openinference-instrumentation-google-genai", "google-genai"), TOOLS),
    "langchain_agent_text": ("LangChain v1 `create_agent`, text search results",
                             ("openinference-instrumentation-langchain", "langchain", "langgraph"),
                             "tool calls, text hits (title, URL, text), an article opened in full; LangGraph thread"),
    "langchain_agent_text --json": ("LangChain v1 `create_agent`, JSON search results",
                                    ("openinference-instrumentation-langchain", "langchain", "langgraph"), TOOLS),
    "langchain_lcel_rerank": ("LangChain LCEL chain with a rerank step",
                              ("openinference-instrumentation-langchain", "langchain-core"),
                              "RETRIEVER span, a document dropped by the rerank step, history in the prompt"),
    "llama_index_query": ("llama-index query engine with a postprocessor",
                          ("openinference-instrumentation-llama-index", "llama-index-core"),
                          "RETRIEVER span, a node dropped by `SimilarityPostprocessor`, a follow-up asked alone"),
    "llama_index_chat": ("llama-index chat engine with a postprocessor",
                         ("openinference-instrumentation-llama-index", "llama-index-core"),
                         "RETRIEVER span, a node dropped by `SimilarityPostprocessor`, chat history"),
    "llama_index_agent": ("llama-index `FunctionAgent`", ("openinference-instrumentation-llama-index", "llama-index-core"),
                          TOOLS + "; workflow `Context`"),
    "openai_agents": ("OpenAI Agents SDK", ("openinference-instrumentation-openai-agents", "openai-agents"),
                      TOOLS + "; history with `to_input_list()`"),
    "litellm_tools": ("litellm", ("openinference-instrumentation-litellm", "litellm"), TOOLS),
    "pydantic_ai_tools": ("pydantic-ai", ("openinference-instrumentation-pydantic-ai", "pydantic-ai-slim"),
                          TOOLS + "; `conversation_id`"),
    "openllmetry_openai": ("openai client, OTel GenAI conventions", ("opentelemetry-instrumentation-openai", "openai"),
                           TOOLS + "; `gen_ai.conversation.id`"),
    "openllmetry_langchain": ("LangChain `create_agent`, OTel GenAI conventions",
                              ("opentelemetry-instrumentation-langchain", "langchain"),
                              "tool calls, text hits, an article opened in full; `gen_ai.conversation.id`"),
    "otel_openai_v2": ("openai client, OTel GenAI log events", ("opentelemetry-instrumentation-openai-v2", "openai"),
                       TOOLS + "; messages only as log events to /v1/logs (`gen_ai.client.inference.operation.details`, "
                       "`EVENT_ONLY`); `gen_ai.conversation.id`"),
    "otel_openai_v2 --legacy": ("openai client, OTel GenAI per-message log events",
                                ("opentelemetry-instrumentation-openai-v2", "openai"),
                                TOOLS + "; messages only as log events to /v1/logs, one a message (`gen_ai.user.message` … "
                                "`gen_ai.choice`, the instrumentor's legacy wrapper chosen by hand)"),
}


#: Cells known to fail with the measuring rules of today (issue 38), each with what goes wrong. A cell
#: listed here that fails is an expected failure; one that passes fails the test until it is taken off the list,
#: so the list (and the support table in docs/audit.md) cannot go stale.
KNOWN: dict[str, str] = {}
#: What a passing cell cannot show, said in the support table's "known limits".
HIDDEN_ANSWER = ("content capture off hides the answer too: the hidden run's turn is stored unauditable with no "
                 "unjudged links (the trace holds none)")
LIMITS = {"pydantic_ai_tools": HIDDEN_ANSWER + " (include_content=False)",
          "openllmetry_openai": HIDDEN_ANSWER + " (TRACELOOP_TRACE_CONTENT=false)",
          "openllmetry_langchain": HIDDEN_ANSWER + " (TRACELOOP_TRACE_CONTENT=false)",
          "otel_openai_v2": HIDDEN_ANSWER + " (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=NO_CONTENT sends no event: "
                            "the trace is audited when the 10 s wait for its log events ends); log records are read, "
                            "not stored, so `verify` cannot replay such a turn",
          "otel_openai_v2 --legacy": "the legacy wrapper is what the instrumentor's releases on `opentelemetry-util-genai` "
                                     "0.x select by default; on 1.x (installed here) it is chosen by hand (the app's "
                                     "`instrument_legacy`). " + HIDDEN_ANSWER + " (the switch `false`: events without content)"}


def versions() -> dict[str, str]:
    """The installed version of every distribution the table names (read in .venv-audit-apps)."""
    names = sorted({d for _, dists, _ in CELLS.values() for d in dists})
    code = ("import importlib.metadata as m, json, sys\n"
            "print(json.dumps({d: m.version(d) for d in sys.argv[1:]}))")
    out = subprocess.run([str(APPS_PYTHON), "-c", code, *names], capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


def _result_path(app: str) -> Path:
    return RESULTS / f"{app.replace(' ', '')}.json"


def save_result(app: str, wrong: dict[str, list[str]]) -> None:
    """Record `app`'s failed checks of this run (one file per app: the suite's workers never write the same file;
    written whole, then renamed, so a reader never sees half of one)."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = _result_path(app)
    part = path.with_suffix(f".{os.getpid()}.part")
    part.write_text(json.dumps(wrong, indent=1), encoding="utf-8")
    part.replace(path)


def results() -> dict[str, dict[str, list[str]]]:
    """Each app's failed checks in the suite's last run (`RESULTS`), by case."""
    out = {}
    for app in CELLS:
        path = _result_path(app)
        if path.exists():
            out[app] = json.loads(path.read_text(encoding="utf-8"))
    return out


def _outcome(wrong: dict[str, list[str]] | None) -> str:
    if wrong is None:
        return "not run"
    failed = [f"{case}: " + "; ".join(sorted({w.split(":")[0] for w in ws})) for case, ws in wrong.items() if ws]
    return "passes" if not failed else "fails — " + " · ".join(failed)


def table(vers: dict[str, str], res: dict[str, dict[str, list[str]]]) -> str:
    lines = ["| framework | instrumentor (tested version) | what the app makes the audit measure | conformance | known limits |",
             "|---|---|---|---|---|"]
    for app, (framework, dists, measured) in CELLS.items():
        named = ", ".join(f"`{d}` {vers.get(d, '?')}" for d in dists)
        lines.append(f"| {framework} | {named} | {measured} | {_outcome(res.get(app))} | {KNOWN.get(app) or LIMITS.get(app, '')} |")
    return "\n".join(lines)


def in_doc(text: str) -> str:
    m = re.search(re.escape(START) + r"\n(.*?)" + re.escape(END), text, re.S)
    return m.group(1).strip() if m else ""


def write(rendered: str) -> None:
    text = DOC.read_text(encoding="utf-8")
    DOC.write_text(re.sub(re.escape(START) + r".*?" + re.escape(END), lambda _: f"{START}\n{rendered}\n{END}", text,
                          flags=re.S), encoding="utf-8")


if __name__ == "__main__":
    rendered = table(versions(), results())
    if "--write" in sys.argv:
        write(rendered)
    print(rendered)
