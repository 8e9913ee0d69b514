"""Attendee links. Absolute ones are built on EVENT_PUBLIC_URL (mails, calendar files, intake
answers); paths serve redirects inside the site, whatever host the browser used."""

from __future__ import annotations

from django.conf import settings
from django.urls import reverse

from events.models import Registration
from events.services import capability


def absolute(path: str) -> str:
    return settings.EVENT_PUBLIC_URL.rstrip("/") + path


def tickets_path(registration: Registration) -> str:
    token = capability.mint(purpose="tickets", subject=registration)
    return reverse("my-tickets", kwargs={"token": token})


def order_tickets_path(order_ref: str) -> str:
    token = capability.mint(purpose="order", subject=order_ref)
    return reverse("my-tickets", kwargs={"token": token})


def ics_path(registration: Registration) -> str:
    token = capability.mint(purpose="ics", subject=registration)
    return reverse("ics", kwargs={"token": token})


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
