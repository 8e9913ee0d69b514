"""The desk's share of `manage.py seed_demo` (hook `events.hooks.seed_demo`): a door login.

Creates the staff user `desk` in the Event desk group once, with a random password printed
that one time (like `bootstrap_admin`), and names two tickets of the demo summit to try, the
summit's ticket sold through an order and not paid yet (the scanner flags it "To pay"), and the
scanner of the multi-slot workshops (its slot chooser).
"""

from __future__ import annotations

import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group

from events.models import RegistrationState, SaleStatus

USERNAME = "desk"


def seed_demo(*, summit, workshops=None, stdout=None, **_: Any) -> None:
    User = get_user_model()
    if User.objects.filter(username=USERNAME).exists():
        return
    password = secrets.token_urlsafe(12)
    user = User.objects.create_user(USERNAME, "desk@localhost", password, is_staff=True)
    user.groups.add(Group.objects.get(name="Event desk"))
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
