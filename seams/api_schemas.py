"""The JSON shapes of the host routes (the sale seam's messages and answers, the catalog reads),
as component schemas of the API description (events.openapi). The message schema says what
`seams.messages.parse` accepts: a text's length counts as sent (not stripped), a required text
holds more than whitespace, a one-line text no control character."""

from __future__ import annotations

from typing import Any

from events.api_schemas import FIRST_CHAR, ONE_LINE_CHAR, free_text
from events.openapi import BIGINT_MAX, nullable, ref, register_schema
from seams import messages

# The whitespace `messages._str` strips around a one-line text, less what `check_storable`
# refuses anywhere in a message (C0 and C1 controls other than tab, line feed and return).
SPACE = "\\t\\n\\r \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000"


def text(max_length: int, *, required: bool = False) -> dict[str, Any]:
    """`messages._str`: a string of at most `max_length` characters as sent, one line once
    stripped; `required`, more than whitespace."""
    body = f"{FIRST_CHAR}{ONE_LINE_CHAR}*" if required else f"{ONE_LINE_CHAR}*"
    return {
        "type": "string",
        "maxLength": max_length,
        "pattern": f"^[{SPACE}]*{body}[{SPACE}]*$",
    }


def optional(schema: dict[str, Any]) -> dict[str, Any]:
    """An optional field: absent, null or the value."""
    return nullable(schema)


AMOUNT = {
    "description": 'A decimal amount ≥ 0: a string such as "120.00", or an integer.',
    "anyOf": [
        {"type": "string", "pattern": messages.AMOUNT_PATTERN},
        {"type": "integer", "minimum": 0, "maximum": messages.AMOUNT_LIMIT - 1},
    ],
}
ID = {"type": "integer", "minimum": 1, "maximum": BIGINT_MAX}

register_schema(
    "SalePartner",
    {
        "type": "object",
        "required": ["ref", "name", "email"],
        "properties": {
            "ref": text(128, required=True),
            "name": text(255),
            "email": text(254),
            "phone": optional(text(32)),
            "company_name": optional(text(255)),
        },
    },
)
register_schema(
    "SaleAttendee",
    {
        "type": "object",
        "properties": {
            "name": optional(text(255)),
            "email": optional(text(254)),
            "phone": optional(text(32)),
            "company_name": optional(text(255)),
            "answers": optional(
                {
                    "type": "object",
                    "description": "`{question id: text or choice id}`, as the intake takes them.",
                    "additionalProperties": {
                        "anyOf": [
                            free_text(4000),
                            {"type": "integer", "minimum": 1, "maximum": BIGINT_MAX},
                        ]
                    },
                }
            ),
        },
    },
)
register_schema(
    "SaleTicketLine",
    {
        "type": "object",
        "required": ["ref", "kind", "price_total", "ticket_id", "quantity"],
        "properties": {
            "ref": text(128, required=True),
            "kind": {"const": "ticket"},
            "price_total": AMOUNT,
            "ticket_id": ID,
            "slot_id": optional(ID),
            "quantity": {"type": "integer", "minimum": 0, "maximum": messages.MAX_QUANTITY},
            "attendees": optional(
                {
                    "type": "array",
                    "description": "At most `quantity`; the others take the partner's details.",
                    "items": ref("SaleAttendee"),
                }
            ),
        },
    },
)
register_schema(
    "SaleBoothLine",
    {
        "type": "object",
        "required": ["ref", "kind", "price_total", "booth_ids"],
        "properties": {
            "ref": text(128, required=True),
            "kind": {"const": "booth"},
            "price_total": AMOUNT,
            "booth_ids": {"type": "array", "minItems": 1, "items": ID},
        },
    },
)
register_schema(
    "SaleOrder",
    {
        "type": "object",
        "required": ["ref", "version", "amount_total", "currency", "partner", "lines"],
        "properties": {
            "ref": text(128, required=True),
            "version": {
                "type": "integer",
                "minimum": 1,
                "maximum": messages.MAX_VERSION,
                "description": "Increases with every change of the order at the host.",
            },
            "amount_total": AMOUNT,
            "currency": text(3, required=True),
            "partner": ref("SalePartner"),
            "utm": optional(
                {
                    "type": "object",
                    "properties": {
                        name: optional(text(128)) for name in ("source", "medium", "campaign")
                    },
                }
            ),
            "lang": ref("Lang"),
            "lines": {
                "type": "array",
                "description": "Line refs are unique within the order.",
                "items": {"oneOf": [ref("SaleTicketLine"), ref("SaleBoothLine")]},
            },
        },
    },
)
register_schema(
    "SaleMessage",
    {
        "description": "One message about an order (`order.*`) or a partner (`partner.updated`).",
        "oneOf": [
            {
                "type": "object",
                "required": ["type", "data"],
                "properties": {
                    "type": {"enum": list(messages.ORDER_TYPES)},
                    "data": {
                        "type": "object",
                        "required": ["order"],
                        "properties": {"order": ref("SaleOrder")},
                    },
                },
            },
            {
                "type": "object",
                "required": ["type", "data"],
                "properties": {
                    "type": {"enum": list(messages.PARTNER_TYPES)},
                    "data": {
                        "type": "object",
                        "required": ["partner"],
                        "properties": {"partner": ref("SalePartner")},
                    },
                },
            },
        ],
    },
)
register_schema(
    "SaleAnswer",
    {
        "type": "object",
        "description": "What the message did: `applied` (with what changed: counts, `lines`, "
        "`booths`, `paid`, `synced`), `duplicate` (this message id was received before) or "
        "`stale` (the order is already at `version`).",
        "required": ["status"],
        "properties": {
            "status": {"enum": ["applied", "duplicate", "stale"]},
            "version": {"type": "integer"},
            "minted": {"type": "integer"},
            "cancelled": {"type": "integer"},
            "kept_attended": {"type": "integer"},
            "paid": {"type": "integer"},
            "synced": {"type": "integer"},
            "lines": {"type": "object"},
            "booths": {"type": "object"},
        },
    },
)
register_schema(
    "SaleParked",
    {
        "allOf": [
            ref("Error"),
            {
                "type": "object",
                "required": ["status"],
                "properties": {"status": {"const": "parked"}},
            },
        ],
        "description": "Refused for a business reason: nothing applied, the message kept as "
        "`parked` for staff to replay. Do not retry it as it is.",
    },
)
register_schema(
    "LinkedProducts",
    {
        "type": "object",
        "required": ["event", "products"],
        "properties": {
            "event": ref("Id"),
            "products": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": [
                        "event_id",
                        "event_name",
                        "ticket_id",
                        "ticket_name",
                        "product_ref",
                        "price",
                        "currency",
                        "start_sale_datetime",
                        "end_sale_datetime",
                        "available",
                    ],
                    "properties": {
                        "event_id": ref("Id"),
                        "event_name": {"type": "string"},
                        "ticket_id": ref("Id"),
                        "ticket_name": {"type": "string"},
                        "product_ref": {"type": "string"},
                        "price": {"type": "string", "pattern": "^[0-9]+(\\.[0-9]+)?$"},
                        "currency": {"type": "string"},
                        "start_sale_datetime": nullable({"type": "string", "format": "date-time"}),
                        "end_sale_datetime": nullable({"type": "string", "format": "date-time"}),
                        "available": nullable({"type": "integer"}),
                    },
                },
            },
        },
    },
)
register_schema(
    "BoothCatalog",
    {
        "type": "object",
        "required": ["event", "booths"],
        "properties": {
            "event": ref("Id"),
            "booths": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["booth_id", "name", "state", "available", "category"],
                    "properties": {
                        "booth_id": ref("Id"),
                        "name": {"type": "string"},
                        "state": {"enum": ["available", "unavailable"]},
                        "available": {"type": "boolean"},
                        "category": {
                            "type": "object",
                            "required": ["id", "name", "price", "currency", "product_ref"],
                            "properties": {
                                "id": ref("Id"),
                                "name": {"type": "string"},
                                "price": {"type": "string", "pattern": "^[0-9]+(\\.[0-9]+)?$"},
                                "currency": {"type": "string"},
                                "product_ref": {"type": "string"},
                            },
                        },
                    },
                },
            },
        },
    },
)
