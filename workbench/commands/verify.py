"""`verify --turn ID --endpoint URL`: replay verification of an audited turn's final model call (docs/audit.md)."""

from __future__ import annotations

import argparse
import json

from ..errors import WorkbenchError
from ..payload import validate_json
from ..redact import scrub_shapes, split_userinfo
from ..render.sources import verification_lines
from ..terminal import neutralize
from ._options import add_db_option, add_json_option, db_path, positive_int


def register(sub) -> None:
    from ..verify import DEFAULT_BUDGET

    p = sub.add_parser("verify", help="Verify an audited turn by replaying its final model call at an endpoint "
                                      "serving the same model, once unchanged and once per consulted document "
                                      "with its text withheld (docs/audit.md; only the final call is replayed).")
    p.add_argument("--turn", required=True, metavar="ID", help="the audited turn (`turns.turn_id`, otel-<trace id>)")
    p.add_argument("--endpoint", required=True, metavar="URL",
                   help="the server: an OpenAI-compatible base URL ending in /v1, or an Ollama server's URL")
    p.add_argument("--provider", choices=("openai", "ollama"), default="openai",
                   help="how the endpoint speaks (default %(default)s: OpenAI-compatible chat completions)")
    p.add_argument("--model", help="model to ask (default: the one the turn recorded, its llm.model_name)")
    p.add_argument("--budget", type=positive_int, default=DEFAULT_BUDGET, metavar="N",
                   help="at most N replays, the control included (default %(default)s); documents over it get no "
                        "verdict")
    add_db_option(p)
    add_json_option(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from ..replay import LIMIT, NativeTurn, replay_verify

    try:
        done = replay_verify(db_path(args), args.turn, args.endpoint, provider=args.provider, model=args.model,
                             budget=args.budget)
    except NativeTurn as exc:
        raise WorkbenchError(f"{exc} (`ask --verify`, `/verify` in `chat`, or the app's Verify sources)") from None
    if args.json:
        print(json.dumps(validate_json(done.payload.to_json()), ensure_ascii=False))
        return 0
    where = scrub_shapes(split_userinfo(args.endpoint)[0])  # credentials in the URL (`user:pw@`, `?api_key=`) never printed
    print(neutralize(f"turn {args.turn}, replayed at {where} ({args.provider}, model {done.model})"))
    for line in verification_lines(done.payload):
        print(neutralize(line))
    for a in done.verification.ablations:
        print(neutralize(f"  {a.doc_id or 'control'}: {a.reason}"))
    print(neutralize(f"limit: {LIMIT}"))
    return 0
