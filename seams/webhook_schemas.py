"""The outbound webhook messages in the OpenAPI description (its top-level `webhooks` map): one
entry per message type, each a `post` whose body is the message we send and whose headers are
the Standard Webhooks ones. The shapes are the payloads the audit-log trigger writes (seams
migration 0007); `tests/seams/test_webhooks_outbox.py` validates real messages against them.
Registered by `register()` from SeamsConfig.ready()."""

from __future__ import annotations

from typing import Any

from events import openapi
from seams.models import WEBHOOK_TYPES

STRING = {"type": "string"}
TIME = {"type": "string", "format": "date-time"}
ID = {"type": "integer", "minimum": 1}


def _nullable(schema: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [schema, {"type": "null"}]}


def _object(properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": properties,
        "required": sorted(properties),
        "additionalProperties": False,
    }


SCHEMAS: dict[str, dict[str, Any]] = {
    "WebhookRegistration": _object(
        {
            "id": ID,
            "event": ID,
            "ticket": _nullable(ID),
            "slot": _nullable(ID),
            "state": {"enum": ["draft", "open", "done", "cancel"]},
            "name": STRING,
            "email": STRING,
            "phone": STRING,
            "company_name": STRING,
            "partner_ref": STRING,
            "sale_order_ref": STRING,
            "sale_order_line_ref": STRING,
            "sale_status": {"enum": ["free", "sold", "to_pay"]},
            "is_paid": {"type": "boolean"},
            "cancel_source": STRING,
            "created_at": TIME,
            "updated_at": TIME,
        }
    ),
    "WebhookWaitlistEntry": _object(
        {
            "id": ID,
            "event": ID,
            "ticket": _nullable(ID),
            "slot": _nullable(ID),
            "state": {"enum": ["waiting", "offered", "accepted", "expired", "removed"]},
            "name": STRING,
            "email": STRING,
            "offered_at": _nullable(TIME),
            "expires_at": _nullable(TIME),
            "offer_version": {"type": "integer", "minimum": 0},
            "registration": _nullable(ID),
        }
    ),
    "WebhookEvent": _object(
        {
            "id": ID,
            "name": STRING,
            "date_begin": TIME,
            "date_end": TIME,
            "date_tz": STRING,
            "kanban_state": STRING,
            "is_published": {"type": "boolean"},
            "active": {"type": "boolean"},
        }
    ),
}

# What each type's `data` carries beside its subject and version.
DATA: dict[str, dict[str, Any]] = {
    "registration": {"registration": openapi.ref("WebhookRegistration")},
    "waitlist": {"entry": openapi.ref("WebhookWaitlistEntry")},
    "event": {"event": openapi.ref("WebhookEvent")},
}
SENT_WHEN = {
    "registration.created": "A registration was made (intake, host order, staff, an accepted "
    "waiting-list offer).",
    "registration.cancelled": "A registration was cancelled (staff, the attendee, a host order).",
    "registration.attended": "A registration was marked attended (the desk or staff).",
    "waitlist.offered": "A waiting-list entry was offered a seat.",
    "waitlist.expired": "A waiting-list offer ran out.",
    "event.cancelled": "The event was cancelled.",
    "event.postponed": "The event's dates changed; `previous` holds the dates before.",
}
HEADER_TEXT = {
    "webhook-id": "The message's id (`msg_…`): the same on every attempt and endpoint; "
    "de-duplicate by it.",
    "webhook-timestamp": "Unix seconds of this attempt.",
    "webhook-signature": "Space-separated `v1,<base64 HMAC-SHA256>` signatures of "
    "`{id}.{timestamp}.{body}` with the endpoint's secret (two during a rotation).",
}


def message_schema(kind: str) -> dict[str, Any]:
    """The whole message of type `kind`: `{type, timestamp, data}`."""
    noun = kind.split(".")[0]
    data = {
        "subject": {"type": "string", "pattern": f"^{noun}:[0-9]+$"},
        "version": {"type": "integer", "minimum": 1},
        **DATA[noun],
    }
    if kind == "event.postponed":
        data["previous"] = _object({"date_begin": TIME, "date_end": TIME})
    return _object({"type": {"const": kind}, "timestamp": TIME, "data": _object(data)})


def path_item(kind: str) -> dict[str, Any]:
    return {
        "post": {
            "operationId": f"webhook_{kind.replace('.', '_')}",
            "summary": SENT_WHEN[kind].split(";")[0].rstrip("."),
            "description": SENT_WHEN[kind]
            + " Signed the Standard Webhooks way; answer 2xx once stored. 408, 425, 429 "
            "(Retry-After honoured), 5xx, a timeout or a refused connection are retried with "
            "backoff; any other 4xx stops this message. A subject's later versions wait for "
            "its earlier ones.",
            "parameters": [
                {
                    "name": name,
                    "in": "header",
                    "required": True,
                    "description": text,
                    "schema": {"type": "string"},
                }
                for name, text in HEADER_TEXT.items()
            ],
            "requestBody": {
                "required": True,
                "content": {"application/json": {"schema": message_schema(kind)}},
            },
            "responses": {
                "2XX": {"description": "Stored: the message is delivered."},
                "default": {"description": "Retried (408, 425, 429, 5xx) or stopped (other 4xx)."},
            },
        }
    }


def register() -> None:
    for name, schema in SCHEMAS.items():
        openapi.register_schema(name, schema)
    for kind in WEBHOOK_TYPES:
        openapi.register_webhook(kind, path_item(kind))
