"""Absolute attendee links built on EVENT_PUBLIC_URL (mails, calendar files, intake answers)."""

from __future__ import annotations

from django.conf import settings
from django.urls import reverse

from events.models import Registration
from events.services import capability


def absolute(path: str) -> str:
    return settings.EVENT_PUBLIC_URL.rstrip("/") + path


def tickets_url(registration: Registration) -> str:
    token = capability.mint(purpose="tickets", subject=registration)
    return absolute(reverse("my-tickets", kwargs={"token": token}))


def order_tickets_url(order_ref: str) -> str:
    token = capability.mint(purpose="order", subject=order_ref)
    return absolute(reverse("my-tickets", kwargs={"token": token}))


def ics_url(registration: Registration) -> str:
    token = capability.mint(purpose="ics", subject=registration)
    return absolute(reverse("ics", kwargs={"token": token}))
