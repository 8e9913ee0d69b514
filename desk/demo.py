"""The desk's share of `manage.py seed_demo` (hook `events.hooks.seed_demo`): a door login.

Creates the staff user `desk` in the Event desk group once, with a random password printed
that one time (like `bootstrap_admin`), and names two tickets of the demo summit to try, the
summit's ticket sold through an order and not paid yet (the scanner flags it "To pay"), and the
scanner of the multi-slot workshops (its slot chooser). One ticket of the summit is left with
an offline conflict (admitted online at the "north door", then admitted offline by `desk`), so
the admin's conflict list and the dashboard's alert have a row to show.
"""

from __future__ import annotations

import secrets
from datetime import timedelta
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.utils import timezone

from desk.services import offline, register_attendee
from events.models import RegistrationState, SaleStatus

USERNAME = "desk"


def seed_demo(*, summit, workshops=None, stdout=None, **_: Any) -> None:
    User = get_user_model()
    if User.objects.filter(username=USERNAME).exists():
        return
    password = secrets.token_urlsafe(12)
    user = User.objects.create_user(USERNAME, "desk@localhost", password, is_staff=True)
    user.groups.add(Group.objects.get(name="Event desk"))
    _conflict(summit, user)
    if stdout is None:
        return
    tickets = list(
        summit.registrations.filter(state=RegistrationState.OPEN)
        .order_by("pk")
        .values_list("barcode", flat=True)[:2]
    )
    to_pay = (
        summit.registrations.filter(
            state=RegistrationState.OPEN, sale_status=SaleStatus.SOLD, is_paid=False
        )
        .values_list("barcode", flat=True)
        .first()
    )
    stdout.write(
        f"demo: desk login: user '{USERNAME}', password '{password}' (printed once) — "
        f"scanner at /desk/{summit.pk}/; barcodes to try: {', '.join(tickets) or 'none'}; "
        f"not paid yet: {to_pay or 'none'}"
        + (f"; a multi-slot scanner at /desk/{workshops.pk}/" if workshops is not None else "")
    )


def _conflict(summit, user) -> None:
    """The last open ticket of the summit (never one printed to try, nor the one to pay),
    admitted at another door, then the same ticket replayed as admitted offline here."""
    reg = (
        summit.registrations.filter(state=RegistrationState.OPEN)
        .exclude(sale_status=SaleStatus.SOLD, is_paid=False)
        .order_by("-pk")
        .first()
    )
    if reg is None or summit.registrations.filter(state=RegistrationState.OPEN).count() < 4:
        return
    now = timezone.now()
    register_attendee(barcode=reg.barcode, event_id=summit.pk, actor="desk:north door")
    register_attendee(
        barcode=reg.barcode,
        event_id=summit.pk,
        actor=user,
        replay=offline.Replay(
            scanned_at=now,
            offline=True,
            offline_status=offline.ADMITTED,
            snapshot_at=now - timedelta(minutes=20),
        ),
    )
