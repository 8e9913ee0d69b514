"""The JSON shapes of the desk API (spec-overlay.md §5), as component schemas of the API
description (events.openapi), and its security scheme: a staff session with the check-in
permission, and Django's CSRF token on the POSTs."""

from __future__ import annotations

from desk.models import NONCE_MAX
from desk.services.attendance import ScanStatus
from events.api_schemas import ONE_LINE_CHAR
from events.openapi import api, nullable, ref, register_schema

api.register_security_scheme(
    "deskSession",
    {
        "type": "apiKey",
        "in": "cookie",
        "name": "sessionid",
        "description": "The session of a staff user holding `events.checkin_registration` "
        "(the Event desk group), signed in at /admin/login/. A POST also sends Django's CSRF "
        "token: the `csrftoken` cookie and its value in the `X-CSRFToken` header "
        "(`csrf_failed` otherwise).",
    },
)
api.register_tag("Desk", "The attendance desk's verbs (staff session).")

register_schema(
    "DeskNonce",
    {
        "type": "string",
        # 1 to NONCE_MAX characters, none a control character (events.inputs, as it came: a
        # nonce is not stripped).
        "pattern": f"^{ONE_LINE_CHAR}{{1,{NONCE_MAX}}}$",
        "description": "Optional, chosen by the desk per scan (a UUID, say): the same nonce "
        "again from the same desk user answers the first answer (same status and body) and "
        "writes nothing more; sent with another request, `nonce_reused` (409). Kept 7 days.",
    },
)
register_schema(
    "DeskScan",
    {
        "type": "object",
        "required": ["barcode"],
        "properties": {
            "barcode": {
                "type": "string",
                "description": "As scanned; surrounding whitespace is ignored, the rest "
                "matched exactly.",
            },
            "event_id": nullable(ref("Id")),
            "slot_id": nullable(ref("Id")),
            "nonce": ref("DeskNonce"),
            "scanned_at": {
                "type": "string",
                "format": "date-time",
                "description": "A scan sent after it was made (a door's queue): when it was "
                "made, with its offset; within the last 24 hours, not in the future "
                "(`invalid_value`). The scan is decided at that time.",
            },
            "offline": {
                "type": "boolean",
                "description": "The door decided this scan offline, from `snapshot`; needs "
                "`scanned_at`, `offline_status` and `snapshot`.",
            },
            "offline_status": {
                "enum": [s.value for s in ScanStatus],
                "description": "What the door showed offline. An offline "
                "`confirmed_registration` the server does not confirm is recorded as a "
                "conflict (`offline_conflict` in the answer).",
            },
            "snapshot": {
                "type": "string",
                "description": "The `signature` of the desk's snapshot the door decided from "
                "(`deskSnapshot`), for the desk's event (`invalid_value` otherwise).",
            },
        },
    },
)
register_schema(
    "DeskConfirm",
    {
        "type": "object",
        "required": ["registration_id"],
        "properties": {"registration_id": ref("Id"), "nonce": ref("DeskNonce")},
    },
)
register_schema(
    "DeskAnswer",
    {
        "type": "object",
        "description": "`status`, then (except for `invalid_ticket`) the registration's summary.",
        "required": ["status"],
        "properties": {
            "status": {"enum": [s.value for s in ScanStatus]},
            "id": ref("Id"),
            "name": {"type": "string"},
            "partner_ref": {"type": "string"},
            "event_id": ref("Id"),
            "event_name": {"type": "string"},
            "ticket_name": nullable({"type": "string"}),
            "slot_name": nullable({"type": "string"}),
            "company_name": {"type": "string"},
            "registration_answers": {"type": "array", "items": {"type": "string"}},
            "sale_status": {"enum": ["free", "sold", "to_pay"]},
            "is_paid": {"type": "boolean"},
            "has_to_pay": {"type": "boolean"},
            "date_closed": nullable({"type": "string", "format": "date-time"}),
            "is_date_closed_today": {"type": "boolean"},
            "offline_conflict": {
                "const": True,
                "description": "Present on a replayed offline admission the server did not "
                "confirm: a conflict is recorded for staff.",
            },
        },
    },
)
register_schema(
    "DeskCounters",
    {
        "type": "object",
        "required": ["event_id", "attended", "expected"],
        "properties": {
            "event_id": ref("Id"),
            "slot_id": ref("Id"),
            "attended": {"type": "integer", "minimum": 0},
            "expected": {"type": "integer", "minimum": 0},
        },
    },
)
register_schema(
    "DeskSnapshot",
    {
        "type": "object",
        "description": "What a door needs to decide while offline. Barcodes are not listed: "
        "each registration is keyed by the hex HMAC-SHA256 of its barcode under `barcode_key` "
        "(this snapshot's own random key, hex).",
        "required": ["event", "generated_at", "barcode_key", "registrations", "signature"],
        "additionalProperties": False,
        "properties": {
            "event": {
                "type": "object",
                "required": ["id", "name", "closed", "date_end"],
                "additionalProperties": False,
                "properties": {
                    "id": ref("Id"),
                    "name": {"type": "string"},
                    "closed": {
                        "type": "boolean",
                        "description": "Closed when generated (cancelled, over or ended).",
                    },
                    "date_end": {"type": "string", "format": "date-time"},
                },
            },
            "generated_at": {"type": "string", "format": "date-time"},
            "barcode_key": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
            "registrations": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": [
                        "key",
                        "id",
                        "state",
                        "name",
                        "ticket_name",
                        "slot_id",
                        "slot_name",
                        "has_to_pay",
                        "date_closed",
                    ],
                    "additionalProperties": False,
                    "properties": {
                        "key": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                        "id": ref("Id"),
                        "state": {"enum": ["draft", "open", "done", "cancel"]},
                        "name": {"type": "string"},
                        "ticket_name": nullable({"type": "string"}),
                        "slot_id": nullable(ref("Id")),
                        "slot_name": nullable({"type": "string"}),
                        "has_to_pay": {"type": "boolean"},
                        "date_closed": nullable({"type": "string", "format": "date-time"}),
                    },
                },
            },
            "signature": {
                "type": "string",
                "description": "Sent back as `snapshot` with the scans decided from it.",
            },
        },
    },
)
