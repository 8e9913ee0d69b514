"""Attendee links. Absolute ones are built on EVENT_PUBLIC_URL (mails, calendar files, intake
answers); paths serve redirects inside the site, whatever host the browser used.

A token path is the URL pattern's text around the token: reverse() runs once per (route,
URLconf, script prefix) and the token is put in its place, as reverse() would put it (tokens
are URL-safe base64 and `:`, which reverse() leaves unquoted; anything else goes through
reverse() itself). An intake answer mints two links per registration (bench B2).
"""

from __future__ import annotations

import re
from functools import lru_cache

from django.conf import settings
from django.urls import get_script_prefix, get_urlconf, reverse

from events.models import Registration
from events.services import capability

_MARKER = "0token0"
# What reverse() puts in a path unchanged: URL-safe base64 and the signer's separator.
_PLAIN_TOKEN = re.compile(r"[A-Za-z0-9_\-:]+")


@lru_cache(maxsize=32)
def _around(name: str, urlconf: str | None, script_prefix: str) -> tuple[str, str]:
    """The path of route `name` before and after its token (reverse() with a marker)."""
    path = reverse(name, kwargs={"token": _MARKER}, urlconf=urlconf)
    before, marker, after = path.partition(_MARKER)
    if not marker or _MARKER in after:
        raise ValueError(f"route {name!r} does not hold its token once")
    return before, after


def _token_path(name: str, token: str) -> str:
    if _PLAIN_TOKEN.fullmatch(token) is None:
        return reverse(name, kwargs={"token": token})
    before, after = _around(name, get_urlconf(), get_script_prefix())
    return before + token + after


def absolute(path: str) -> str:
    return settings.EVENT_PUBLIC_URL.rstrip("/") + path


def tickets_path(registration: Registration) -> str:
    token = capability.mint(purpose="tickets", subject=registration)
    return _token_path("my-tickets", token)


def order_tickets_path(order_ref: str) -> str:
    token = capability.mint(purpose="order", subject=order_ref)
    return _token_path("my-tickets", token)


def ics_path(registration: Registration) -> str:
    token = capability.mint(purpose="ics", subject=registration)
    return _token_path("ics", token)


def tickets_url(registration: Registration) -> str:
    return absolute(tickets_path(registration))


def order_tickets_url(order_ref: str) -> str:
    return absolute(order_tickets_path(order_ref))


def ics_url(registration: Registration) -> str:
    return absolute(ics_path(registration))


def url_for(*, registration: Registration, purpose: str) -> str:
    """The absolute link of one purpose for a registration (`order`: its sale order's page)."""
    if purpose == "tickets":
        return tickets_url(registration)
    if purpose == "ics":
        return ics_url(registration)
    if purpose == "order":
        return order_tickets_url(registration.sale_order_ref)
    raise ValueError(f"unknown purpose {purpose!r}")
