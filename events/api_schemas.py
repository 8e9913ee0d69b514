"""The JSON shapes of the core's public API (the intake, the waiting list, the health check), as
component schemas of the API description (events.openapi), and the text rules every app's
schemas share.

A text rule here says in JSON Schema what `events.inputs` decides: surrounding whitespace (what
Python's `str.strip` removes) is dropped, what remains holds no control character and is at most
the column's length. The patterns express exactly that, so a schema-valid text is one the views
accept and an invalid one is refused.
"""

from __future__ import annotations

from typing import Any

from events import i18n, inputs
from events.openapi import BIGINT_MAX, nullable, ref, register_schema

# What Python's str.strip() removes (str.isspace), as a character class.
STRIPPED = (
    "\\t\\n\\u000b\\f\\r\\u001c-\\u001f \\u0085\\u00a0\\u1680\\u2000-\\u200a"
    "\\u2028\\u2029\\u202f\\u205f\\u3000"
)
# inputs.ONE_LINE_REFUSED. (Lone surrogates, refused too by inputs.storable, are left out of the
# patterns: Schemathesis drops a pattern that names them, and no client sends one by choice.)
ONE_LINE_CHAR = "[^\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029\\ufffe\\uffff]"
# inputs.TEXT_REFUSED: free text keeps tab, line feed and carriage return.
TEXT_CHAR = "[^\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\u007f-\\u009f\\ufffe\\uffff]"


# A one-line character that strip() keeps at the start: neither refused nor whitespace.
FIRST_CHAR = (
    "[^\\u0000-\\u0020\\u007f-\\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f"
    "\\u205f\\u3000\\ufffe\\uffff]"
)


def one_line(max_length: int | None = None, *, non_blank: bool = False) -> dict[str, Any]:
    """A one-line text of at most `max_length` characters once stripped (`inputs.check_text`);
    `non_blank`: something must remain."""
    if non_blank:
        rest = "*" if max_length is None else f"{{0,{max_length - 1}}}"
        body = f"{FIRST_CHAR}{ONE_LINE_CHAR}{rest}"
    else:
        body = ONE_LINE_CHAR + ("*" if max_length is None else f"{{0,{max_length}}}")
    return {"type": "string", "pattern": f"^[{STRIPPED}]*{body}[{STRIPPED}]*$"}


def free_text(max_length: int | None = None) -> dict[str, Any]:
    count = "*" if max_length is None else f"{{0,{max_length}}}"
    return {"type": "string", "pattern": f"^{TEXT_CHAR}{count}$"}


# An id the intake reads with `inputs.as_id`: a JSON integer, or ASCII digits in a string.
ID_TEXT = {"type": "string", "pattern": "^[" + STRIPPED + "]*[0-9]{1,19}[" + STRIPPED + "]*$"}
LOOSE_ID = {
    "description": "An id: an integer, or its digits as a string.",
    "anyOf": [ref("Id"), ID_TEXT],
}
# `None` or an empty string: no ticket / slot named.
NO_ID = {"anyOf": [{"type": "null"}, {"const": ""}]}


def contact(field: str) -> dict[str, Any]:
    """A contact field (name, email, phone, company_name) within its Registration column."""
    return nullable(one_line(inputs.limit(field)))


BLANK = {"type": "string", "pattern": f"^[{STRIPPED}]*$"}


def email(*, required: bool) -> dict[str, Any]:
    """An email address (`contacts.is_valid_email`) within its column; optional: blank too."""
    address = {"allOf": [one_line(inputs.limit("email"), non_blank=True), {"format": "email"}]}
    return address if required else {"anyOf": [{"type": "null"}, BLANK, address]}


register_schema(
    "Attendee",
    {
        "type": "object",
        "description": "One attendee: a name, and an email address when given.",
        "required": ["name"],
        "properties": {
            "name": {
                **one_line(inputs.limit("name"), non_blank=True),
                "description": "Required (on an event with a name question, its answer may "
                "give it instead).",
            },
            "email": email(required=False),
            "phone": contact("phone"),
            "company_name": contact("company_name"),
            "answers": {
                "description": "`{question id: text or choice id}` for the event's questions "
                "(blank answers are dropped); a mandatory question must be answered.",
                "anyOf": [
                    {"type": "null"},
                    {
                        "type": "object",
                        "propertyNames": ID_TEXT,
                        "additionalProperties": {
                            "anyOf": [
                                {"type": "null"},
                                free_text(),
                                {"type": "integer", "minimum": 1, "maximum": BIGINT_MAX},
                            ]
                        },
                    },
                ],
            },
        },
    },
)
register_schema(
    "Utm",
    {
        "type": "object",
        "description": "Campaign tags, cut to 128 characters; a value that is not text is ignored.",
        "properties": {
            name: {"anyOf": [one_line(), {"not": {"type": "string"}}]} for name in inputs.UTM_FIELDS
        },
    },
)
register_schema(
    "IntakeRequest",
    {
        "type": "object",
        "description": "One registration request: one registration per attendee (the "
        "quantity), all on one ticket (and slot).",
        "required": ["attendees"],
        "properties": {
            "ticket_id": {
                "description": "The ticket (required when the event has tickets).",
                "anyOf": [LOOSE_ID, NO_ID],
            },
            "slot_id": {
                "description": "The slot (required on a multi-slot event, else none).",
                "anyOf": [LOOSE_ID, NO_ID],
            },
            "attendees": {
                "type": "array",
                "minItems": 1,
                "maxItems": 30,
                "description": "1 to the ticket's `limit_max_per_order` (30 when it has none).",
                "items": ref("Attendee"),
            },
            "utm": {
                "description": "Campaign tags; anything but an object is ignored.",
                "anyOf": [ref("Utm"), {"not": {"type": "object"}}],
            },
            "lang": ref("Lang"),
        },
    },
)
register_schema(
    "Lang",
    {
        "description": "The attendee's language, kept on the registration: every later mail, "
        "SMS, offer and calendar file to the attendee uses it. Absent or null: the request's "
        "(`Accept-Language`), else the event's default language. Error `message`s of this "
        "answer are in it too; `code`s never change.",
        "anyOf": [{"enum": list(i18n.LANGUAGE_CODES)}, {"type": "null"}],
    },
)
register_schema(
    "RegistrationLinks",
    {
        "type": "object",
        "required": ["id", "state", "barcode", "tickets_url", "ics_url"],
        "properties": {
            "id": ref("Id"),
            "state": {"const": "open"},
            "barcode": {"type": "string", "pattern": "^[0-9]{1,20}$"},
            "tickets_url": {"type": "string", "format": "uri"},
            "ics_url": {"type": "string", "format": "uri"},
        },
    },
)
register_schema(
    "IntakeCreated",
    {
        "type": "object",
        "required": ["event_id", "registrations"],
        "properties": {
            "event_id": ref("Id"),
            "registrations": {"type": "array", "minItems": 1, "items": ref("RegistrationLinks")},
        },
    },
)
register_schema(
    "WaitlistJoin",
    {
        "type": "object",
        "description": "Join the waiting list of a sold-out ticket (and slot).",
        "required": ["name", "email"],
        "properties": {
            "name": one_line(inputs.limit("name"), non_blank=True),
            "email": email(required=True),
            "ticket_id": {
                "description": "The ticket (required when the event has tickets).",
                "anyOf": [LOOSE_ID, NO_ID],
            },
            "slot_id": {
                "description": "The slot (required on a multi-slot event, else none).",
                "anyOf": [LOOSE_ID, NO_ID],
            },
            "lang": ref("Lang"),
        },
    },
)
register_schema(
    "WaitlistReceived",
    {
        "type": "object",
        "description": "The same answer whether the address was on the list already or not.",
        "required": ["status", "event_id", "ticket_id", "slot_id", "email"],
        "properties": {
            "status": {"const": "received"},
            "event_id": ref("Id"),
            "ticket_id": nullable(ref("Id")),
            "slot_id": nullable(ref("Id")),
            "email": {"type": "string"},
        },
    },
)
register_schema(
    "Health",
    {
        "type": "object",
        "required": ["db", "broker"],
        "properties": {
            "db": {"type": "string", "description": "`ok`, or `error: <exception class>`."},
            "broker": {"type": "string", "description": "`ok`, or `error: <exception class>`."},
        },
    },
)
