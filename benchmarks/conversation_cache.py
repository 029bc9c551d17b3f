"""A `llamacpp` follow-up evaluates only what is new: llama.cpp's prompt cache over a conversation (issue 22, item 8).

A three-turn conversation with the default model (SmolLM2-135M-Instruct) in agent mode over a small help center of
three articles written to a temporary folder (SSO, Okta, SCIM; the demo corpus's long articles make every
uncached prompt minutes long on a busy 2-core machine): "How do I configure SSO?", "And with Okta?", "How long
does that take?" (json-steps, the provider's default, or `--tool-protocol native`). The earlier turns reach the model as chat messages that render exactly as their own
last model call saw them (`agent.history_messages`), so llama.cpp's one slot still holds that prefix and
evaluates only what follows it.

Measured per follow-up (turns 2 and 3), on its first model call, from llama.cpp's own `timings`: the prompt tokens
it took from the cache (`cache_n`) and those it evaluated (`prompt_n`). The history's size is the prompt before the
new question (every prompt token but those of the question's own message); "evaluated again" is the part of the
history among the evaluated tokens: max(0, prompt_n - question tokens) / history tokens. The anchor, in the same
run on the same loaded model: the same conversation with the cache off (`cache_prompt=False`, what verification's
re-runs use), which evaluates every prompt whole. Printed: medians over `--runs` conversations per arm, alternating.

    .venv/bin/python benchmarks/conversation_cache.py [--runs 3] [--max-tokens 96] [--tool-protocol json-steps]

Timings depend on the machine's load (other processes share its cores): compare the arms within one run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from workbench.agent import run_turn  # noqa: E402
from workbench.context_policy import history_for  # noqa: E402
from workbench.providers.llamacpp import LlamaCppProvider  # noqa: E402
from workbench.session import Session  # noqa: E402
from workbench.types import ContextPolicy  # noqa: E402

QUESTIONS = ("How do I configure SSO?", "And with Okta?", "How long does that take?")
DOCS = {
    "sso-setup": ("Configure SAML single sign-on", "Owners open Settings → Security → SSO, choose SAML 2.0 and paste "
                  "the identity provider's metadata URL. Test the connection with one account before you enforce SSO "
                  "for everyone; members keep their passwords until then."),
    "sso-okta": ("Single sign-on with Okta", "In Okta, add the Orbitly app from the catalogue, copy its metadata URL "
                 "into Settings → Security → SSO and assign the people or groups who may sign in. Setting it up takes "
                 "about ten minutes."),
    "scim": ("Provision members with SCIM", "Turn on SCIM under Settings → Security → Provisioning and give your "
             "identity provider the token shown there; new members are created and removed automatically."),
}


def small_corpus() -> Path:
    root = Path(tempfile.mkdtemp(prefix="conversation-cache-"))
    for doc_id, (title, text) in DOCS.items():
        (root / f"{doc_id}.md").write_text(f"---\nid: {doc_id}\ntitle: {title}\nurl: https://help.example/{doc_id}\n"
                                           f"---\n{text}\n", encoding="utf-8")
    return root
ARMS = {"cache off (anchor)": False, "cache on (default)": True}


def conversation(session: Session, cache: bool, max_tokens: int, protocol: str, k: int) -> list[dict]:
    """One three-turn conversation; per follow-up: history tokens, tokens evaluated, from the cache, seconds."""
    policy, records, rows = ContextPolicy(), [], []
    for position, question in enumerate(QUESTIONS, start=1):
        provider = LlamaCppProvider(max_tokens=max_tokens, cache_prompt=cache)
        t0 = time.perf_counter()
        record = run_turn(question, provider, session.toolbox, k=k, tool_protocol=protocol,
                          history=history_for(records, policy), conversation_id="bench", position=position,
                          context=policy)
        seconds = time.perf_counter() - t0
        if record.status != "ok":
            print(f"  turn {position} ended {record.status}: {record.error}", flush=True)
        if position > 1 and provider.timings:
            first = provider.timings[0]
            evaluated, cached = first.get("prompt_n", 0), first.get("cache_n", 0)
            asked = question_tokens(provider, question)
            history = evaluated + cached - asked
            rows.append({"turn": position, "history": history, "evaluated": evaluated, "cached": cached,
                         "again": max(0, evaluated - asked) / history, "seconds": seconds,
                         "first_call_ms": record.model_calls[0].latency_ms if record.model_calls else None})
        records.append(record)
    return rows


def question_tokens(provider: LlamaCppProvider, question: str) -> int:
    """Tokens of the new question's own message as SmolLM2's chat template (ChatML) renders it, role markers and
    the generation prompt after it included: counted by llama.cpp's tokenizer (its loopback server's /tokenize)."""
    model = provider.loaded()
    text = f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"
    request = urllib.request.Request(f"{model.address}/tokenize", method="POST",
                                     data=json.dumps({"content": text, "add_special": False}).encode(),
                                     headers={"Authorization": f"Bearer {model.api_key}",
                                              "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return len(json.loads(response.read())["tokens"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=96)
    ap.add_argument("--tool-protocol", default="json-steps", choices=["json-steps", "native"])
    ap.add_argument("-k", type=int, default=2)
    args = ap.parse_args()
    session = Session.open(small_corpus(), trace=False)
    LlamaCppProvider(max_tokens=1).complete([{"role": "user", "content": "hi"}], [])  # load the model, untimed
    seen: dict[str, list[dict]] = {arm: [] for arm in ARMS}
    for run in range(args.runs):
        for arm, cache in ARMS.items():
            rows = conversation(session, cache, args.max_tokens, args.tool_protocol, args.k)
            seen[arm] += rows
            print(f"  run {run + 1}, {arm}: " + "; ".join(
                f"turn {r['turn']}: history {r['history']}, evaluated {r['evaluated']}, cached {r['cached']} "
                f"({r['again']:.0%} of the history again), {r['seconds']:.1f} s" for r in rows), flush=True)
    print(f"\nthree-turn conversation, default model, agent mode ({args.tool_protocol}), k={args.k}, "
          f"max_tokens={args.max_tokens}, {args.runs} runs per arm (median per follow-up)")
    print(f"{'arm':20} {'turn':>4} {'history tok':>11} {'evaluated':>9} {'from cache':>10} {'history again':>13} "
          f"{'1st call s':>10} {'turn s':>7}")
    for arm, rows in seen.items():
        for turn in (2, 3):
            mine = [r for r in rows if r["turn"] == turn]
            if not mine:
                continue
            med = lambda key: statistics.median(r[key] for r in mine)  # noqa: E731
            print(f"{arm:20} {turn:>4} {med('history'):11.0f} {med('evaluated'):9.0f} {med('cached'):10.0f} "
                  f"{med('again'):13.1%} {med('first_call_ms') / 1000:10.2f} {med('seconds'):7.1f}")


if __name__ == "__main__":
    main()
