"""`seed_demo` gives the demo summit its type's booths, some booked; a second run adds none."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from booths.models import Booth, BoothBooking
from events.models import Event

pytestmark = pytest.mark.django_db


def test_the_demo_summit_has_booths_some_booked():
    call_command("seed_demo", stdout=StringIO())
    summit = Event.objects.get(name="Open Source Summit")
    booths = Booth.objects.filter(event=summit)
    assert booths.count() == 5
    assert sorted(booths.values_list("state", flat=True)) == ["available"] * 3 + ["unavailable"] * 2
    assert booths.filter(is_paid=True).count() == 1
    states = sorted(
        BoothBooking.objects.filter(booth__event=summit).values_list("state", flat=True)
    )
    assert states == ["cancelled", "confirmed", "confirmed", "pending"]
    before = (Booth.objects.count(), BoothBooking.objects.count())
    call_command("seed_demo", stdout=StringIO())
    assert (Booth.objects.count(), BoothBooking.objects.count()) == before
