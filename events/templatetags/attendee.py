"""Dates on the attendee's pages and mails, in the active language's words and order
(events.i18n.date_format: the formats are gettext messages, so each language orders them).

`{{ value|when }}` (the long form), `{{ value|when:"short" }}`, `{{ value|when:"day" }}`: the
value in the current time zone (`{% timezone event.date_tz %}`), as Django's `date` filter.
`{{ event|tr:"name" }}`: a text staff entered per language, in the active language.
"""

from __future__ import annotations

from django import template
from django.template.defaultfilters import date

from events import i18n

register = template.Library()


@register.filter(expects_localtime=True, is_safe=False)
def when(value, style: str = "long") -> str:
    if value in (None, ""):
        return ""
    return date(value, i18n.date_format(style))


@register.filter
def tr(obj, field: str):
    """`obj.<field>` in the active language (its translation, else the column): event content
    staff entered per language (events.i18n.localized)."""
    if obj in (None, ""):
        return ""
    return i18n.localized(obj, field)
