#!/usr/bin/env python3
"""Sign one sale-seam message with the `standardwebhooks` library and POST it (docs/integrators.md).

    .venv/bin/python scripts/send_webhook.py message.json                 # a file, or - for stdin
    .venv/bin/python scripts/send_webhook.py --example-ticket 3 --id msg_1   # a built-in order
    .venv/bin/python scripts/send_webhook.py --url http://127.0.0.1:8000/seams/v1/sale ...

The secret is --secret, else the first entry of EVENT_SEAM_SECRET from the environment, else
from the `.env` beside manage.py (what `make run` wrote). Prints the HTTP status and the JSON
answer; exits 0 on a 2xx answer, 1 otherwise. Send the same --id twice to see `duplicate`.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path

from standardwebhooks.webhooks import Webhook

ROOT = Path(__file__).resolve().parent.parent


def secret_from_env() -> str:
    value = os.environ.get("EVENT_SEAM_SECRET", "")
    if not value.strip() and (ROOT / ".env").is_file():
        for line in (ROOT / ".env").read_text().splitlines():
            if line.startswith("EVENT_SEAM_SECRET="):
                value = line.partition("=")[2].strip().strip("'\"")
    if not value.split():
        sys.exit("no secret: pass --secret or set EVENT_SEAM_SECRET")
    return value.split()[0]


def example(ticket_id: int, ref: str, version: int, kind: str) -> dict:
    return {
        "type": kind,
        "data": {
            "order": {
                "ref": ref,
                "version": version,
                "amount_total": "120.00",
                "currency": "EUR",
                "partner": {"ref": "P7", "name": "Pat Partner", "email": "pat@example.org"},
                "utm": {"source": "shop"},
                "lines": [
                    {
                        "ref": f"{ref}/1",
                        "kind": "ticket",
                        "ticket_id": ticket_id,
                        "slot_id": None,
                        "quantity": 2,
                        "price_total": "120.00",
                        "attendees": [{"name": "Ann Attendee", "email": "ann@example.org"}],
                    }
                ],
            }
        },
    }


def sign(body: str, *, secret: str, msg_id: str, at: datetime) -> dict[str, str]:
    hook = Webhook(secret if secret.startswith("whsec_") else secret.encode("utf-8"))
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": hook.sign(msg_id=msg_id, timestamp=at, data=body),
    }


def send(url: str, body: str, headers: dict[str, str]) -> tuple[int, str]:
    request = urllib.request.Request(  # noqa: S310 — the URL is the operator's own
        url,
        data=body.encode("utf-8"),
        headers={**headers, "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file", nargs="?", help="the JSON message (- for stdin)")
    parser.add_argument("--url", default="http://127.0.0.1:8000/seams/v1/sale")
    parser.add_argument("--secret", help="default: EVENT_SEAM_SECRET (its first secret)")
    parser.add_argument("--id", dest="msg_id", help="webhook-id (default: a new random id)")
    parser.add_argument("--example-ticket", type=int, metavar="TICKET_ID")
    parser.add_argument("--order", default="SO-EXAMPLE", help="with --example-ticket")
    parser.add_argument("--version", type=int, default=1, help="with --example-ticket")
    parser.add_argument(
        "--type",
        default="order.confirmed",
        choices=["order.confirmed", "order.paid", "order.cancelled"],
        help="with --example-ticket",
    )
    args = parser.parse_args(argv)
    if args.example_ticket is not None:
        body = json.dumps(example(args.example_ticket, args.order, args.version, args.type))
    elif args.file:
        body = sys.stdin.read() if args.file == "-" else Path(args.file).read_text("utf-8")
    else:
        parser.error("give a message file or --example-ticket")
    msg_id = args.msg_id or f"msg_{secrets.token_hex(12)}"
    headers = sign(
        body, secret=args.secret or secret_from_env(), msg_id=msg_id, at=datetime.now(tz=UTC)
    )
    status, answer = send(args.url, body, headers)
    print(f"{status} {answer}")
    return 0 if 200 <= status < 300 else 1


if __name__ == "__main__":
    sys.exit(main())
