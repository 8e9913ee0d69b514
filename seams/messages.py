"""The sale seam's message schema (spec-overlay.md §1.2): parse, or refuse naming the path.

`parse(document)` turns a decoded JSON document into a `Message`, or raises `MalformedMessage`
with `path` (e.g. `data.order.lines[1].quantity`). Pure: no database access. Besides the
schema it refuses what PostgreSQL could not store (NUL characters, lone surrogates, NaN and
infinities, ids beyond bigint), so a stored body is always storable and a refusal is never a 500,
and the control characters of the core's input rule (events.inputs.control_free): none
in a one-line field (refs, names, emails, phones, companies, currency, campaign tags), only tab
and line breaks in any other text (an answer), so what the seam mints always exports.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from events.i18n import LANGUAGE_CODES, supported
from events.inputs import control_free, json_int
from seams.errors import MalformedMessage

ORDER_TYPES = ("order.confirmed", "order.paid", "order.cancelled")
PARTNER_TYPES = ("partner.updated",)
TYPES = ORDER_TYPES + PARTNER_TYPES
LINE_KINDS = ("ticket", "booth")
MAX_ID = 2**63 - 1
MAX_VERSION = 2**31 - 1  # SeamOrder.version is a PositiveIntegerField
MAX_QUANTITY = 1000  # one line never books more (a guard against a runaway host, documented)
MAX_DEPTH = 32
# An amount: below 10**13, ASCII digits with an optional fraction (the API description says the
# same: seams.api_schemas).
AMOUNT_LIMIT = 10**13
AMOUNT_PATTERN = r"^[0-9]{1,13}(\.[0-9]+)?$"
AMOUNT_RE = re.compile(AMOUNT_PATTERN.strip("^$"))


@dataclass(frozen=True)
class PartnerData:
    ref: str
    name: str
    email: str
    phone: str = ""
    company_name: str = ""


@dataclass(frozen=True)
class LineData:
    ref: str
    kind: str
    price_total: Decimal
    ticket_id: int | None = None
    slot_id: int | None = None
    quantity: int = 0
    attendees: tuple[dict[str, Any], ...] = ()
    booth_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class OrderData:
    ref: str
    version: int
    amount_total: Decimal
    currency: str
    partner: PartnerData
    utm: dict[str, str] = field(default_factory=dict)
    lines: tuple[LineData, ...] = ()
    lang: str | None = None  # the attendees' language (None: the event's default)


@dataclass(frozen=True)
class Message:
    type: str
    order: OrderData | None = None
    partner: PartnerData | None = None

    @property
    def order_ref(self) -> str:
        return self.order.ref if self.order is not None else ""


def _fail(path: str, message: str) -> MalformedMessage:
    return MalformedMessage(f"{path}: {message}", path=path)


def check_storable(value: Any, path: str = "", depth: int = 0) -> None:
    """Refuse what jsonb / text columns cannot hold, naming where it is."""
    if depth > MAX_DEPTH:
        raise _fail(path or "$", "nested too deeply")
    if isinstance(value, str):
        if "\x00" in value:
            raise _fail(path or "$", "contains a NUL character")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise _fail(path or "$", "is not valid Unicode text") from None
        if not control_free(value, multiline=True):
            raise _fail(path or "$", "contains a control character")
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise _fail(path or "$", "is not a finite number")
    elif isinstance(value, dict):
        for key, item in value.items():
            check_storable(key, f"{path}.{key}" if path else str(key), depth + 1)
            check_storable(item, f"{path}.{key}" if path else str(key), depth + 1)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            check_storable(item, f"{path}[{index}]", depth + 1)


def _obj(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(path, "must be an object")
    return value


def _str(
    obj: dict, key: str, path: str, *, max_length: int, required: bool = True, empty: bool = False
) -> str:
    where = f"{path}.{key}"
    if key not in obj or obj[key] is None:
        if required:
            raise _fail(where, "is required")
        return ""
    value = obj[key]
    if not isinstance(value, str):
        raise _fail(where, "must be a string")
    if not empty and not value.strip():
        raise _fail(where, "must not be empty")
    if len(value) > max_length:
        raise _fail(where, f"is longer than {max_length} characters")
    if not control_free(value.strip()):
        raise _fail(where, "must be one line without control characters (no tab, no line break)")
    return value


def _int(obj: dict, key: str, path: str, *, minimum: int, maximum: int) -> int:
    where = f"{path}.{key}"
    value = json_int(obj.get(key))
    if value is None:
        raise _fail(where, "must be an integer")
    if not minimum <= value <= maximum:
        raise _fail(where, f"must be between {minimum} and {maximum}")
    return value


def _amount(obj: dict, key: str, path: str) -> Decimal:
    """ASCII digits with an optional fraction (what `Decimal` alone would take besides, such as
    "1_000", " 5", "1e3" or other scripts' digits, is no amount a host means), or an integer;
    ≥ 0 and below AMOUNT_LIMIT."""
    where = f"{path}.{key}"
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise _fail(where, 'must be a decimal string such as "120.00"')
    if isinstance(value, str) and AMOUNT_RE.fullmatch(value) is None:
        raise _fail(where, 'is not a decimal number such as "120.00"')
    amount = Decimal(value)
    if not 0 <= amount < AMOUNT_LIMIT:
        raise _fail(where, "must be a non-negative amount")
    return amount


def parse_partner(value: Any, path: str) -> PartnerData:
    obj = _obj(value, path)
    return PartnerData(
        ref=_str(obj, "ref", path, max_length=128),
        name=_str(obj, "name", path, max_length=255, empty=True),
        email=_str(obj, "email", path, max_length=254, empty=True),
        phone=_str(obj, "phone", path, max_length=32, required=False, empty=True),
        company_name=_str(obj, "company_name", path, max_length=255, required=False, empty=True),
    )


def _attendee(value: Any, path: str) -> dict[str, Any]:
    obj = _obj(value, path)
    attendee = {
        "name": _str(obj, "name", path, max_length=255, required=False, empty=True),
        "email": _str(obj, "email", path, max_length=254, required=False, empty=True),
        "phone": _str(obj, "phone", path, max_length=32, required=False, empty=True),
        "company_name": _str(obj, "company_name", path, max_length=255, required=False, empty=True),
        "answers": {},
    }
    answers = obj.get("answers")
    if answers is not None:
        answers = _obj(answers, f"{path}.answers")
        kept: dict[str, Any] = {}
        for key, answer in answers.items():
            where = f"{path}.answers.{key}"
            choice = json_int(answer)
            if choice is None and not isinstance(answer, str):
                raise _fail(where, "must be a text or a choice id")
            if isinstance(answer, str) and len(answer) > 4000:
                raise _fail(where, "is longer than 4000 characters")
            if choice is not None and not 0 < choice <= MAX_ID:
                raise _fail(where, "is not a choice id")
            kept[key] = answer if choice is None else choice
        attendee["answers"] = kept
    return attendee


def _line(value: Any, path: str) -> LineData:
    obj = _obj(value, path)
    ref = _str(obj, "ref", path, max_length=128)
    kind = obj.get("kind")
    if kind not in LINE_KINDS:
        raise _fail(f"{path}.kind", f"must be one of {', '.join(LINE_KINDS)}")
    price_total = _amount(obj, "price_total", path)
    if kind == "booth":
        booth_ids = obj.get("booth_ids")
        if not isinstance(booth_ids, list) or not booth_ids:
            raise _fail(f"{path}.booth_ids", "must be a non-empty list of booth ids")
        ids = [json_int(booth_id) for booth_id in booth_ids]
        for index, booth_id in enumerate(ids):
            if booth_id is None:
                raise _fail(f"{path}.booth_ids[{index}]", "must be an integer")
            if not 0 < booth_id <= MAX_ID:
                raise _fail(f"{path}.booth_ids[{index}]", "is not a booth id")
        return LineData(ref=ref, kind=kind, price_total=price_total, booth_ids=tuple(ids))
    ticket_id = _int(obj, "ticket_id", path, minimum=1, maximum=MAX_ID)
    slot_id = None
    if obj.get("slot_id") is not None:
        slot_id = _int(obj, "slot_id", path, minimum=1, maximum=MAX_ID)
    quantity = _int(obj, "quantity", path, minimum=0, maximum=MAX_QUANTITY)
    attendees: list[dict[str, Any]] = []
    if obj.get("attendees") is not None:
        raw = obj["attendees"]
        if not isinstance(raw, list):
            raise _fail(f"{path}.attendees", "must be a list")
        if len(raw) > quantity:
            raise _fail(f"{path}.attendees", "has more entries than quantity")
        attendees = [_attendee(a, f"{path}.attendees[{i}]") for i, a in enumerate(raw)]
    return LineData(
        ref=ref,
        kind=kind,
        price_total=price_total,
        ticket_id=ticket_id,
        slot_id=slot_id,
        quantity=quantity,
        attendees=tuple(attendees),
    )


def _order(value: Any, path: str) -> OrderData:
    obj = _obj(value, path)
    ref = _str(obj, "ref", path, max_length=128)
    version = _int(obj, "version", path, minimum=1, maximum=MAX_VERSION)
    amount_total = _amount(obj, "amount_total", path)
    currency = _str(obj, "currency", path, max_length=3)
    partner = parse_partner(obj.get("partner"), f"{path}.partner")
    utm: dict[str, str] = {}
    if obj.get("utm") is not None:
        raw = _obj(obj["utm"], f"{path}.utm")
        for key in ("source", "medium", "campaign"):
            utm[key] = _str(raw, key, f"{path}.utm", max_length=128, required=False, empty=True)
    lang = obj.get("lang")
    if lang is not None and supported(lang) is None:
        raise _fail(f"{path}.lang", f"must be one of {', '.join(LANGUAGE_CODES)} or null")
    raw_lines = obj.get("lines")
    if not isinstance(raw_lines, list):
        raise _fail(f"{path}.lines", "must be a list")
    lines = tuple(_line(line, f"{path}.lines[{i}]") for i, line in enumerate(raw_lines))
    refs = [line.ref for line in lines]
    if len(set(refs)) != len(refs):
        raise _fail(f"{path}.lines", "line refs must be unique")
    return OrderData(
        ref=ref,
        version=version,
        amount_total=amount_total,
        currency=currency,
        partner=partner,
        utm=utm,
        lines=lines,
        lang=lang,
    )


def parse(document: Any) -> Message:
    """A decoded JSON document → Message, or MalformedMessage naming the failing path."""
    check_storable(document)
    top = _obj(document, "$")
    kind = top.get("type")
    if kind not in TYPES:
        raise _fail("type", f"must be one of {', '.join(TYPES)}")
    data = _obj(top.get("data"), "data")
    if kind in PARTNER_TYPES:
        return Message(type=kind, partner=parse_partner(data.get("partner"), "data.partner"))
    return Message(type=kind, order=_order(data.get("order"), "data.order"))
