"""Signing as a host does: every request of these tests is signed by the `standardwebhooks`
library (`Webhook.sign`), with a secret the test sets in EVENT_SEAM_SECRET."""

from __future__ import annotations

import base64
import json
import secrets
from datetime import UTC, datetime
from itertools import count

from django.test import Client
from standardwebhooks.webhooks import Webhook

URL = "/seams/v1/sale"
_ids = count(1)


def new_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def signed_headers(
    body: bytes, *, secret: str, msg_id: str | None = None, at: datetime | None = None
) -> dict[str, str]:
    msg_id = msg_id or f"msg_{next(_ids)}_{secrets.token_hex(4)}"
    at = at or datetime.now(tz=UTC)
    hook = Webhook(secret if secret.startswith("whsec_") else secret.encode())
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": hook.sign(msg_id=msg_id, timestamp=at, data=body.decode()),
    }


class Host:
    """A host shop posting signed messages through the test client."""

    def __init__(self, secret: str, client: Client | None = None) -> None:
        self.secret = secret
        self.client = client or Client(raise_request_exception=False)

    def post(
        self,
        document,
        *,
        msg_id=None,
        at=None,
        secret=None,
        body: bytes | None = None,
        headers=None,
    ):
        body = json.dumps(document).encode() if body is None else body
        if headers is None:
            headers = signed_headers(body, secret=secret or self.secret, msg_id=msg_id, at=at)
        return self.client.post(URL, data=body, content_type="application/json", headers=headers)


def order_message(
    kind: str = "order.confirmed",
    *,
    ref: str = "SO042",
    version: int = 1,
    lines=(),
    amount_total: str = "120.00",
    partner: dict | None = None,
    utm: dict | None = None,
) -> dict:
    order = {
        "ref": ref,
        "version": version,
        "amount_total": amount_total,
        "currency": "EUR",
        "partner": partner
        or {"ref": "P7", "name": "Pat Partner", "email": "pat@example.org", "phone": ""},
        "lines": list(lines),
    }
    if utm is not None:
        order["utm"] = utm
    return {"type": kind, "data": {"order": order}}


def ticket_line(ticket, quantity: int, *, ref: str = "SO042/1", attendees=None, slot=None):
    line = {
        "ref": ref,
        "kind": "ticket",
        "ticket_id": ticket.pk,
        "slot_id": slot.pk if slot is not None else None,
        "quantity": quantity,
        "price_total": "120.00",
    }
    if attendees is not None:
        line["attendees"] = attendees
    return line
