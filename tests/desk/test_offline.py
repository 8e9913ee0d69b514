"""The desk's offline mode, server side (docs/spec.md "Offline mode"): the signed snapshot,
the fields of a replayed scan, and the conflict an offline admission may reveal."""

from __future__ import annotations

import hashlib
import hmac
import json
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from desk.dashboard import desk_panel
from desk.models import OfflineConflict
from events.models import EventAuditLog, Registration
from tests.desk.test_views import ongoing_event, post, user_in
from tests.events import factories
from tests.helpers import snapshot as written

pytestmark = pytest.mark.django_db

SCAN = "/desk/api/scan"


def snapshot_url(event) -> str:
    return f"/desk/api/events/{event.pk}/snapshot"


@pytest.fixture
def door(client):
    client.force_login(user_in("Event desk", username="door"))
    return client


@pytest.fixture
def event():
    event = ongoing_event(name="Summit")
    ticket = factories.TicketFactory(event=event, name="Community")
    factories.RegistrationFactory(
        event=event, ticket=ticket, name="Ada", barcode="5100000000000001", sale_status="sold"
    )
    factories.RegistrationFactory(
        event=event, name="Alan", barcode="5100000000000002", state="cancel"
    )
    return event


def signed(client, event) -> dict:
    response = client.get(snapshot_url(event))
    assert response.status_code == 200
    return response.json()


def replay(event, barcode, signature, *, at=None, shown="confirmed_registration", **extra):
    at = at or timezone.now() - timedelta(minutes=5)
    return {
        "barcode": barcode,
        "event_id": event.pk,
        "scanned_at": at.isoformat(),
        "offline": True,
        "offline_status": shown,
        "snapshot": signature,
        "nonce": "n-" + barcode,  # accepted, not read on this side
        **extra,
    }


# --- the snapshot ------------------------------------------------------------------------------


@pytest.mark.parametrize("who", ["anonymous", "staff without the desk permission"])
def test_the_snapshot_is_refused_to_anyone_but_the_desk(client, event, who):
    if who != "anonymous":
        client.force_login(user_in(None, username="plainstaff"))
    response = client.get(snapshot_url(event))
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "forbidden"
    assert "no-store" in response["Cache-Control"]


def test_the_snapshot_lists_what_the_door_decides_by_and_no_barcode(door, event):
    response = door.get(snapshot_url(event))
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert "no-store" in response["Cache-Control"]
    assert "5100000000000001" not in response.content.decode()
    body = response.json()
    assert body["event"] == {
        "id": event.pk,
        "name": "Summit",
        "closed": False,
        "date_end": event.date_end.isoformat(),
    }
    key = bytes.fromhex(body["barcode_key"])
    rows = {row["key"]: row for row in body["registrations"]}
    ada = rows[hmac.new(key, b"5100000000000001", hashlib.sha256).hexdigest()]
    assert {k: v for k, v in ada.items() if k not in ("key", "id")} == {
        "state": "open",
        "name": "Ada",
        "ticket_name": "Community",
        "slot_id": None,
        "slot_name": None,
        "has_to_pay": True,
        "date_closed": None,
    }
    alan = rows[hmac.new(key, b"5100000000000002", hashlib.sha256).hexdigest()]
    assert alan["state"] == "cancel"
    # a fresh key per snapshot: two snapshots share no key
    assert door.get(snapshot_url(event)).json()["barcode_key"] != body["barcode_key"]


def test_the_snapshot_costs_the_same_queries_for_two_or_forty_registrations(door, event):
    def count() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert door.get(snapshot_url(event)).status_code == 200
        return len(queries)

    few = count()
    factories.RegistrationFactory.create_batch(38, event=event)
    assert count() == few
    assert few <= 6  # session, user, the two permission reads, the event, its registrations


# --- a replayed scan ---------------------------------------------------------------------------


def test_an_offline_scan_is_admitted_at_its_real_time_and_audited_so(door, event):
    signature = signed(door, event)["signature"]
    at = timezone.now().replace(microsecond=0) - timedelta(minutes=7)
    answer = post(door, SCAN, replay(event, "5100000000000001", signature, at=at))
    assert answer.status_code == 200
    assert answer.json()["status"] == "confirmed_registration"
    assert "offline_conflict" not in answer.json()
    reg = Registration.objects.get(barcode="5100000000000001")
    assert (reg.state, reg.date_closed) == ("done", at)
    row = EventAuditLog.objects.get(verb="registration.scanned", registration=reg)
    assert row.data["scanned_at"] == at.isoformat() and row.data["offline"] is True
    assert row.data["offline_status"] == "confirmed_registration"
    assert row.at > at  # the server's own time beside the scan's
    assert not OfflineConflict.objects.exists()


def future():
    return (timezone.now() + timedelta(minutes=10)).isoformat()


def old():
    return (timezone.now() - timedelta(hours=25)).isoformat()


@pytest.mark.parametrize(
    "change",
    [
        {"scanned_at": "yesterday"},
        {"scanned_at": "2026-01-01T10:00:00"},  # no offset
        {"scanned_at": 1700000000},
        {"scanned_at": "future"},
        {"scanned_at": "old"},
        {"offline": "yes"},
        {"offline_status": "admitted"},
        {"snapshot": "tampered"},
        {"snapshot": "lone surrogate"},  # JSON carries one as an escape (\\ud800)
        {"snapshot": "other event"},
        {"scanned_at": None},  # offline without its time
    ],
    ids=lambda change: next(iter(change.items()))[0] + "=" + str(next(iter(change.values()))),
)
def test_a_bad_replay_field_is_refused_and_writes_nothing(door, event, change):
    signature = signed(door, event)["signature"]
    other = signed(door, ongoing_event())["signature"]
    body = replay(event, "5100000000000001", signature)
    value = next(iter(change.values()))
    value = {"future": future(), "old": old(), "other event": other}.get(value, value)
    if value == "tampered":
        value = signature[:-2] + ("AA" if not signature.endswith("AA") else "BB")
    if value == "lone surrogate":
        value = signature[:-1] + "\ud800"
    key = next(iter(change))
    if value is None:
        body.pop(key)
    else:
        body[key] = value
    before = written(event)
    response = post(door, SCAN, body)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_value"
    assert written(event) == before
    assert not OfflineConflict.objects.exists()


def test_two_doors_admitting_one_ticket_offline_make_one_attendance_and_one_conflict(door, event):
    signature = signed(door, event)["signature"]
    west = Client()
    west.force_login(user_in("Event desk", username="west"))
    first_at = timezone.now().replace(microsecond=0) - timedelta(minutes=9)
    second_at = first_at + timedelta(minutes=2)

    first = post(door, SCAN, replay(event, "5100000000000001", signature, at=first_at)).json()
    body = replay(event, "5100000000000001", signature, at=second_at)
    second = post(west, SCAN, body).json()
    again = post(west, SCAN, body).json()  # the same replay, retried

    assert first["status"] == "confirmed_registration"
    assert second["status"] == again["status"] == "already_registered"
    assert second["offline_conflict"] is True
    reg = Registration.objects.get(barcode="5100000000000001")
    assert reg.state == "done"
    admitted = EventAuditLog.objects.filter(
        registration=reg, verb="registration.scanned", data__status="confirmed_registration"
    )
    assert admitted.count() == 1
    (conflict,) = OfflineConflict.objects.all()
    assert (conflict.event_id, conflict.registration_id) == (event.pk, reg.pk)
    assert conflict.server_status == "already_registered"
    assert (conflict.kept_actor_label, conflict.kept_at) == ("door", first_at)
    assert (conflict.offline_actor_label, conflict.offline_scanned_at) == ("west", second_at)
    assert conflict.snapshot_at is not None

    panel = desk_panel(event)
    assert {f.label: f.value for f in panel.figures}["Offline conflicts"] == 1
    (alert,) = panel.alerts
    assert alert.count == 1 and f"event__id__exact={event.pk}" in alert.url


def test_an_online_admission_then_an_offline_one_is_a_conflict(door, event):
    """The ticket was admitted online; a door that saw it open in its list admitted it too."""
    signature = signed(door, event)["signature"]
    online = post(door, SCAN, {"barcode": "5100000000000001", "event_id": event.pk})
    assert online.json()["status"] == "confirmed_registration"
    answer = post(door, SCAN, replay(event, "5100000000000001", signature)).json()
    assert (answer["status"], answer["offline_conflict"]) == ("already_registered", True)
    assert OfflineConflict.objects.count() == 1


def test_an_offline_refusal_replayed_is_no_conflict(door, event):
    signature = signed(door, event)["signature"]
    shown = "canceled_registration"
    answer = post(door, SCAN, replay(event, "5100000000000002", signature, shown=shown)).json()
    assert answer["status"] == "canceled_registration"
    assert "offline_conflict" not in answer
    assert not OfflineConflict.objects.exists()


def test_a_late_scan_sent_online_keeps_its_time_without_the_offline_fields(door, event):
    at = timezone.now().replace(microsecond=0) - timedelta(minutes=1)
    body = {"barcode": "5100000000000001", "event_id": event.pk, "scanned_at": at.isoformat()}
    assert post(door, SCAN, body).json()["status"] == "confirmed_registration"
    row = EventAuditLog.objects.get(verb="registration.scanned")
    assert row.data["scanned_at"] == at.isoformat() and "offline" not in row.data
    assert json.loads(json.dumps(row.data))  # plain JSON
