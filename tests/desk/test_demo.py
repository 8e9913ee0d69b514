"""seed_demo gives the desk a login (once) and the desk works on the demo summit: a ticket to
try, one sold and not paid yet (flagged "to pay"), the multi-slot workshops' scanner, and one
offline conflict."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client

from desk.models import OfflineConflict
from events.models import Event

pytestmark = pytest.mark.django_db


def test_seed_demo_creates_a_desk_login_once_and_it_scans():
    out = StringIO()
    call_command("seed_demo", stdout=out)
    found = re.search(r"desk login: user 'desk', password '([^']+)'", out.getvalue())
    assert found, out.getvalue()
    user = get_user_model().objects.get(username="desk")
    assert user.is_staff and not user.is_superuser
    assert user.has_perm("events.checkin_registration")

    again = StringIO()
    call_command("seed_demo", stdout=again)
    assert "desk login" not in again.getvalue()
    assert get_user_model().objects.filter(username="desk").count() == 1
    # one offline conflict to show in the admin and on the dashboard, left once
    (conflict,) = OfflineConflict.objects.all()
    assert (conflict.offline_actor_label, conflict.kept_actor_label) == ("desk", "north door")

    assert user.check_password(found.group(1))
    client = Client()
    client.force_login(user)  # (axes refuses Client.login without a request)
    summit = Event.objects.get(name="Open Source Summit")
    assert client.get(f"/desk/{summit.pk}/").status_code == 200
    barcode = re.search(r"barcodes to try: (\d+)", out.getvalue()).group(1)
    body = {"barcode": barcode, "event_id": summit.pk}
    answer = client.post("/desk/api/scan", body, content_type="application/json")
    assert answer.json()["status"] == "confirmed_registration"

    to_pay = re.search(r"not paid yet: (\d+)", out.getvalue()).group(1)
    flagged = client.post(
        "/desk/api/scan", {"barcode": to_pay, "event_id": summit.pk}, "application/json"
    ).json()
    assert (flagged["status"], flagged["sale_status"], flagged["has_to_pay"]) == (
        "confirmed_registration",
        "sold",
        True,
    )
    workshops = re.search(r"a multi-slot scanner at /desk/(\d+)/", out.getvalue()).group(1)
    assert Event.objects.get(pk=workshops).is_multi_slots
    assert '<select id="slot"' in client.get(f"/desk/{workshops}/").content.decode()
