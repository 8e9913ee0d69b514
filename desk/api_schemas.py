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
