"""The shape of visitor input: the one owner of each limit a typed value must respect.

Invariants:
- a column-bound text is refused when longer than its column: the limit is read from the
  model field (`Registration._meta`), never written twice; the form's `maxlength` reads the
  same `limit()`;
- text PostgreSQL cannot store (NUL) or UTF-8 cannot encode (lone surrogates) is refused;
- a control character is refused (`control_free`): a one-line value (a name, an email, a
  phone, a company, a reference, a campaign tag) holds none, not even a tab or a line break; a
  free-text answer may hold tab, line feed and carriage return, nothing else. What is stored is
  then always something an export, a mail or a log line can carry (an XLSX cell refuses C0
  controls: one stored name made the event's export fail for every staff user);
- an id is ASCII digits or a JSON integer inside the bigint range; anything else (Unicode
  digits `str.isdigit()` accepts but `int()` refuses or reads differently, bools, floats,
  huge numbers) is no id at all, so the caller's "unknown" refusal answers;
- a JSON body nested deeper than MAX_JSON_DEPTH is no JSON document (`load_json`): later code
  that walks it (a fingerprint's `json.dumps`, an audit row) never runs out of stack;
- every refusal is a `ValidationFailed` naming the field; nothing here writes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from django.db.models import CharField
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from events import i18n
from events.errors import ValidationFailed
from events.models import Registration

BIGINT_MAX = 2**63 - 1
# Containers inside containers a JSON body may hold. The deepest document any route expects
# (a seam message with attendees and answers) nests about 7 levels.
MAX_JSON_DEPTH = 32
CONTACT_FIELDS = ("name", "email", "phone", "company_name")
# What a refusal calls a contact field (the form's labels).
FIELD_LABELS = {
    "name": gettext_lazy("Full name"),
    "email": gettext_lazy("Email"),
    "phone": gettext_lazy("Phone"),
    "company_name": gettext_lazy("Company"),
}
UTM_FIELDS = ("source", "medium", "campaign")
# C0 and C1 controls, DEL, the Unicode line and paragraph separators, and the two
# noncharacters XML (so XLSX) cannot hold. Free text keeps tab, LF and CR.
ONE_LINE_REFUSED = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\ufffe\uffff]")
TEXT_REFUSED = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ufffe\uffff]")


def limit(field: str) -> int:
    """The max_length of a Registration column (`name`, `email`, `utm_source`, …)."""
    column = Registration._meta.get_field(field)
    assert isinstance(column, CharField) and column.max_length is not None, field
    return column.max_length


def as_id(value: Any) -> int | None:
    """A positive database id from a JSON integer or ASCII digits, else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str):
        text = value.strip()
        if not (text.isascii() and text.isdigit()) or len(text) > 19:
            return None
        value = int(text)
    if isinstance(value, int) and 0 < value <= BIGINT_MAX:
        return value
    return None


def json_int(value: Any) -> int | None:
    """A JSON integer as JSON Schema reads one: an int, or a number without a fraction (`5.0`);
    never a bool. None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value if isinstance(value, int) else None


# An id written in a query string: ASCII digits, no sign, no leading zero, no whitespace.
QUERY_ID = re.compile(r"[1-9][0-9]{0,18}")


def query_id(value: str) -> int | None:
    """The id a query parameter writes (QUERY_ID), else None. A number beyond the bigint range
    is returned as it is: well formed, it names nothing (the caller answers "not found")."""
    return int(value) if QUERY_ID.fullmatch(value) else None


def load_json(body: bytes | str) -> Any:
    """`json.loads`, raising ValueError (as for text that is not JSON) for a document nested
    deeper than MAX_JSON_DEPTH — the parser's own recursion limit included — and
    UnicodeDecodeError (a ValueError too) for bytes that are not UTF-8."""
    try:
        document = json.loads(body)
    except RecursionError:
        raise ValueError("The JSON document is nested too deeply.") from None
    pending = [(document, 1)]
    while pending:  # a loop, not recursion: the check itself needs no stack
        value, depth = pending.pop()
        children: Iterable[Any]
        if isinstance(value, dict):
            children = value.values()
        elif isinstance(value, list):
            children = value
        else:
            continue
        if depth > MAX_JSON_DEPTH:
            raise ValueError("The JSON document is nested too deeply.")
        pending.extend((child, depth + 1) for child in children)
    return document


def storable(value: str) -> bool:
    """PostgreSQL text can hold it: no NUL, no lone surrogate."""
    if "\x00" in value:
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def control_free(value: str, *, multiline: bool = False) -> bool:
    """No control character one line (or, `multiline`, a free text) may not hold."""
    refused = TEXT_REFUSED if multiline else ONE_LINE_REFUSED
    return refused.search(value) is None


def check_text(
    value: str,
    *,
    code: str,
    max_length: int | None = None,
    label: str = "",
    multiline: bool = False,
    **where: Any,
) -> str:
    """`value` stripped, or a refusal (`code`, `where` names the field: field=/question=).
    One line unless `multiline` (a free-text answer); surrounding whitespace, a trailing line
    break included, is dropped before the control characters are looked for."""
    field = where.get("field")
    what = str(label or FIELD_LABELS.get(field) or field or _("This answer"))
    if not storable(value):
        raise ValidationFailed(
            _("%(what)s contains characters that cannot be stored.") % {"what": what},
            code=code,
            **where,
        )
    text = value.strip()
    if not control_free(text, multiline=multiline):
        message = (
            _("%(what)s contains a control character, which it cannot hold.")
            if multiline
            else _(
                "%(what)s must be one line of text without control characters (such as a "
                "line break or a tab)."
            )
        )
        raise ValidationFailed(message % {"what": what}, code=code, **where)
    if max_length is not None and len(text) > max_length:
        raise ValidationFailed(
            _("%(what)s is too long (at most %(max_length)s characters).")
            % {"what": what, "max_length": max_length},
            code=code,
            max_length=max_length,
            **where,
        )
    return text


def check_lang(raw: Any) -> str | None:
    """A body's optional `lang`: absent or null is None, else one of the product's languages
    (`invalid_value` naming `lang` otherwise)."""
    if raw is None:
        return None
    lang = i18n.supported(raw)
    if lang is None:
        raise ValidationFailed(
            _("lang must be one of %(languages)s.") % {"languages": ", ".join(i18n.LANGUAGE_CODES)},
            code="invalid_value",
            field="lang",
        )
    return lang


def check_contact(value: str, *, field: str, attendee: int) -> str:
    """A contact field (name, email, phone, company_name) within its column."""
    return check_text(
        value, code="invalid_attendee", max_length=limit(field), attendee=attendee, field=field
    )
