"""The seams overlay's share of `manage.py seed_demo`: an outbound webhook endpoint at the local
sink (EVENT_WEBHOOK_SINK_URL), then one applied and one parked inbox message (the applied one's
registrations are the endpoint's first deliveries).

Both go through `record_and_apply` (the path of a verified webhook), so the demo shows the
real rows: an applied `order.confirmed` that minted two registrations on the summit, and an
`order.confirmed` naming a ticket that does not exist, parked as `unknown_reference`.
Idempotent: the message ids are fixed.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings

from seams.messages import parse
from seams.models import SeamInbox, WebhookEndpoint
from seams.services import webhooks
from seams.services.receive import record_and_apply

APPLIED_ID = "msg_demo_applied"
PARKED_ID = "msg_demo_parked"


def _order(ref: str, ticket_id: int, quantity: int) -> dict[str, Any]:
    return {
        "type": "order.confirmed",
        "data": {
            "order": {
                "ref": ref,
                "version": 1,
                "amount_total": "240.00",
                "currency": "EUR",
                "partner": {
                    "ref": "P-3001",
                    "name": "Ada Host",
                    "email": "ada.host@example.org",
                    "company_name": "Host Shop Ltd",
                },
                "utm": {"source": "shop"},
                "lines": [
                    {
                        "ref": f"{ref}/1",
                        "kind": "ticket",
                        "ticket_id": ticket_id,
                        "quantity": quantity,
                        "price_total": "240.00",
                        "attendees": [{"name": "Linus Demo", "email": "linus@example.org"}],
                    }
                ],
            }
        },
    }


def demo_endpoint(stdout=None) -> None:
    """An endpoint for every event at the local webhook sink (`make run` starts it), so the demo
    shows deliveries arrive; none when EVENT_WEBHOOK_SINK_URL is empty."""
    url = (settings.EVENT_WEBHOOK_SINK_URL or "").strip()
    if not url or WebhookEndpoint.objects.filter(url=url).exists():
        return
    webhooks.create_endpoint(name="Demo host (local sink)", url=url, actor="system")
    if stdout is not None:
        stdout.write(f"demo: webhook endpoint at {url} (every message type, every event)")


def seed_demo(*, summit, stdout=None, **_: Any) -> None:
    demo_endpoint(stdout)
    seeded = set(
        SeamInbox.objects.filter(message_id__in=(APPLIED_ID, PARKED_ID)).values_list(
            "message_id", flat=True
        )
    )
    ticket = summit.tickets.order_by("pk").first()
    if ticket is None:
        return
    missing_ticket = (summit.tickets.order_by("-pk").values_list("pk", flat=True).first()) + 10**6
    for message_id, document in (
        (APPLIED_ID, _order("SO-DEMO-1", ticket.pk, 2)),
        (PARKED_ID, _order("SO-DEMO-2", missing_ticket, 1)),
    ):
        if message_id in seeded:
            continue
        result = record_and_apply(message_id=message_id, document=document, message=parse(document))
        if stdout is not None:
            stdout.write(f"demo: seam message {message_id} → {result.status}")
